package e2e_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// programs are main packages built once for the suite, into one folder, by a
// single "go build" that BeforeSuite starts in the background.
type programs struct {
	dir string
	// done is closed when the build has finished; out and err are set before.
	done chan struct{}
	out  []byte
	err  error
}

// buildPrograms starts building pkgs (import paths, or paths relative to
// test/e2e) with -race, as the suite itself is built: a data race in an
// example or test program makes it exit 66. The build stops and its folder
// is removed at the end of the suite.
func buildPrograms(ctx context.Context, pkgs ...string) *programs {
	GinkgoHelper()
	dir, err := os.MkdirTemp("", "converge-e2e-bin-")
	Expect(err).NotTo(HaveOccurred())
	// The build outlives BeforeSuite's context; the suite's cleanup ends it.
	buildCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p := &programs{dir: dir, done: make(chan struct{})}
	cmd := exec.CommandContext(buildCtx, "go", append([]string{"build", "-race", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	started := time.Now()
	go func() {
		defer close(p.done)
		p.out, p.err = cmd.CombinedOutput()
		GinkgoWriter.Printf("built %d programs in %v\n", len(pkgs), time.Since(started).Round(time.Millisecond))
	}()
	DeferCleanup(func() {
		cancel()
		<-p.done
		Expect(os.RemoveAll(dir)).To(Succeed())
	})
	return p
}

// path returns the executable of the program built from the package whose
// last path element is name, waiting for the build if need be. A cold build
// cache makes the first build take minutes; later ones link in seconds.
func (p *programs) path(ctx context.Context, name string) string {
	GinkgoHelper()
	Eventually(ctx, p.done).WithTimeout(4*time.Minute).Should(BeClosed(), "building the programs")
	Expect(p.err).NotTo(HaveOccurred(), "go build: %s", p.out)
	return filepath.Join(p.dir, path.Base(name))
}

// command returns a command running the program name with args. Race
// detector builds sleep a second at exit by default; this one does not, so
// specs can time how soon a program exits.
func (p *programs) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	GinkgoHelper()
	cmd := exec.Command(p.path(ctx, name), args...)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	return cmd
}

// freeAddress returns a loopback address with a port nobody listens on now,
// for programs that take an address flag and do not report the port they
// got for ":0". Another process could take the port before the program
// does; on a test machine that is rare enough.
func freeAddress() string {
	GinkgoHelper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}
