package envtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

const (
	// stopGrace is how long a process has to exit after SIGTERM before it gets SIGKILL.
	stopGrace = 5 * time.Second
	// pollInterval is the pause between two readiness checks.
	pollInterval = 50 * time.Millisecond
	// tailBytes is how much of a process's latest output is kept for error messages.
	tailBytes = 16 << 10
	// tailLines is how many of those lines an error message shows.
	tailLines = 40
)

// process is one run of a child process. The fields set before start are immutable;
// start, stop and kill are called by the Environment under its lifecycle lock, and done,
// tail and waitErr may be read from any goroutine (waitErr only once done is closed).
type process struct {
	name    string    // "etcd", "kube-apiserver", …
	path    string    // the binary
	args    []string  // flags
	logPath string    // log file; "" when output is set
	output  io.Writer // serialized Options.Output; nil means logPath

	cmd     *exec.Cmd
	tail    *tailBuffer
	done    chan struct{} // closed once the process has exited and been reaped
	waitErr error         // the result of cmd.Wait
}

// start starts the process; it does not wait for it to be ready. A process may be
// started again (with the same arguments) once it has exited.
func (p *process) start() error {
	var dest io.Writer
	var closeDest func() error
	if p.output != nil {
		lw := &lineWriter{prefix: p.name + ": ", out: p.output}
		dest, closeDest = lw, lw.flush
	} else {
		f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("open log of %s: %w", p.name, err)
		}
		fmt.Fprintf(f, "=== converge envtest: %s %s at %s\n", p.path, strings.Join(p.args, " "), time.Now().Format(time.RFC3339Nano))
		dest, closeDest = f, f.Close
	}
	p.tail = &tailBuffer{}
	w := io.MultiWriter(dest, p.tail)

	cmd := exec.Command(p.path, p.args...)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.WaitDelay = time.Second // do not hang on a pipe that an orphan holds open
	if err := startProcess(cmd); err != nil {
		_ = closeDest()
		return fmt.Errorf("start %s %s: %w", p.name, p.path, err)
	}
	p.cmd = cmd
	p.done = make(chan struct{})
	go func(done chan struct{}) {
		p.waitErr = cmd.Wait()
		_ = closeDest()
		close(done)
	}(p.done)
	return nil
}

// running reports whether the process was started and has not exited yet.
func (p *process) running() bool {
	if p == nil || p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after stopGrace or once ctx is
// done, and returns once the process has been reaped. An exit caused by the signals is
// not an error.
func (p *process) stop(ctx context.Context) error {
	if !p.running() {
		return nil
	}
	if err := terminate(p.cmd.Process); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return p.kill()
	}
	timer := time.NewTimer(stopGrace)
	defer timer.Stop()
	select {
	case <-p.done:
		return nil
	case <-timer.C:
	case <-ctx.Done():
	}
	return p.kill()
}

// kill sends SIGKILL to the process group and returns once the process has been reaped.
func (p *process) kill() error {
	if !p.running() {
		return nil
	}
	if err := kill(p.cmd.Process); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s (pid %d): %w", p.name, p.cmd.Process.Pid, err)
	}
	<-p.done
	return nil
}

// waitReady calls check every pollInterval until it returns nil, ctx is done or the
// process exits. Its errors name the process and carry the tail of its output.
func (p *process) waitReady(ctx context.Context, check func(context.Context) error) error {
	var last error
	for {
		attemptCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(attemptCtx)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return p.failure(fmt.Errorf("not ready: %w (last check: %w)", ctx.Err(), last))
		case <-p.done:
			return p.failure(fmt.Errorf("exited before ready: %w", p.exitError()))
		case <-time.After(pollInterval):
		}
	}
}

// exitError describes how the exited process ended.
func (p *process) exitError() error {
	if p.waitErr == nil {
		return errors.New("exit status 0")
	}
	return p.waitErr
}

// addrInUse reports whether the process's latest output says a port was taken, which
// happens when another process grabbed a port between freePorts and the start.
func (p *process) addrInUse() bool {
	return p.tail != nil && bytes.Contains(p.tail.bytes(), []byte("address already in use"))
}

// failure wraps err with the process name and the tail of its output.
func (p *process) failure(err error) error {
	where := "output"
	if p.logPath != "" {
		where = p.logPath
	}
	return &processError{name: p.name, err: err, where: where, tail: p.tail.lastLines(tailLines)}
}

// processError is a process that failed, with the tail of its output.
type processError struct {
	name  string
	err   error
	where string
	tail  string
}

func (e *processError) Error() string {
	if e.tail == "" {
		return fmt.Sprintf("%s: %v (no output in %s)", e.name, e.err, e.where)
	}
	return fmt.Sprintf("%s: %v\n--- last lines of %s ---\n%s", e.name, e.err, e.where, e.tail)
}

func (e *processError) Unwrap() error { return e.err }

// tailBuffer keeps the last tailBytes written to it. It is safe for concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte // mu guards buf
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - tailBytes; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

func (t *tailBuffer) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Clone(t.buf)
}

// lastLines returns the last n complete or partial lines, without a trailing newline.
func (t *tailBuffer) lastLines(n int) string {
	if t == nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(t.bytes()), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// syncWriter serializes writes to w, for an Options.Output shared by several processes.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer // mu guards writes to w
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// lineWriter writes whole lines to out, each prefixed. os/exec calls Write from one
// goroutine at a time; flush is called after the last Write.
type lineWriter struct {
	prefix string
	out    io.Writer
	buf    []byte // the unfinished last line
}

func (l *lineWriter) Write(b []byte) (int, error) {
	l.buf = append(l.buf, b...)
	i := bytes.LastIndexByte(l.buf, '\n')
	if i < 0 {
		return len(b), nil
	}
	var out bytes.Buffer
	for line := range bytes.Lines(l.buf[:i+1]) {
		out.WriteString(l.prefix)
		out.Write(line)
	}
	l.buf = append(l.buf[:0], l.buf[i+1:]...)
	if _, err := l.out.Write(out.Bytes()); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (l *lineWriter) flush() error {
	if len(l.buf) == 0 {
		return nil
	}
	_, err := fmt.Fprintf(l.out, "%s%s\n", l.prefix, l.buf)
	l.buf = nil
	return err
}

// freePorts returns n distinct free TCP ports on 127.0.0.1, found by listening on port 0.
// They are free when returned, not reserved: a process may take one before ours starts,
// which the callers detect (addrInUse) and retry.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port on 127.0.0.1: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
