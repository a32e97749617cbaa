package envtest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/internal/testenv"
)

func TestStartFailureCarriesTheLogTail(t *testing.T) {
	t.Parallel()
	requireControlPlane(t)
	tests := []struct {
		name   string
		output *testenv.Buffer
		where  string // where the error says the log is
	}{
		{name: "log files", where: "kube-apiserver.log ---"},
		{name: "Output", output: &testenv.Buffer{}, where: "last lines of output ---"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := envtest.Options{APIServerFlags: []string{"--no-such-flag=1"}}
			if tc.output != nil {
				opts.Output = tc.output
			}
			env := envtest.New(opts)
			defer env.Stop()
			_, err := env.Start(t.Context())
			for _, s := range []string{"start kube-apiserver", "exited before ready", tc.where, "unknown flag: --no-such-flag"} {
				if err == nil || !strings.Contains(err.Error(), s) {
					t.Errorf("Start error does not contain %q:\n%v", s, err)
				}
			}
			if env.Dir() != "" {
				t.Errorf("Dir() = %q after a failed Start, want it cleaned up", env.Dir())
			}
			if tc.output != nil {
				out := tc.output.String()
				if !strings.Contains(out, "\netcd: ") || !strings.Contains(out, "\nkube-apiserver: ") {
					t.Errorf("Output lacks lines prefixed with the process names:\n%.2000s", out)
				}
			}
		})
	}
}

func TestLogFilesLiveInDir(t *testing.T) {
	t.Parallel()
	env := sharedEnv(t)
	for _, name := range []string{"etcd.log", "kube-apiserver.log", "kubeconfig", "certs/ca.crt"} {
		fi, err := os.Stat(filepath.Join(env.Dir(), name))
		if err != nil || fi.Size() == 0 {
			t.Errorf("%s in Dir(): %v, want a non-empty file", name, err)
		}
	}
}
