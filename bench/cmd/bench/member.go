package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// member is one running contender process whose reports go to a tracker
// it may share with other processes (the members of a ring) and whose
// replies are its own.
type member struct {
	name string // the contender, or the member's identity in a ring
	cmd  *exec.Cmd
	in   io.Writer
	rp   replies
	log  *os.File

	// exited is closed once the process has exited; waitErr is then its
	// error.
	exited  chan struct{}
	waitErr error
}

// startMember starts bin with args, its standard error into logPath and
// its reports into t.
func startMember(name, bin string, args []string, env []string, logPath string, t *tracker) (*member, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	m := &member{name: name, cmd: exec.Command(bin, args...), rp: newReplies(), log: logf, exited: make(chan struct{})}
	m.cmd.Stderr = logf
	m.cmd.Env = append(os.Environ(), env...)
	if m.in, err = m.cmd.StdinPipe(); err != nil {
		logf.Close()
		return nil, err
	}
	stdout, err := m.cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := m.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() {
		t.readWith(stdout, m.rp)
		m.waitErr = m.cmd.Wait()
		close(m.exited)
	}()
	return m, nil
}

func (m *member) pid() int { return m.cmd.Process.Pid }

// errorf names the process and its log.
func (m *member) errorf(format string, args ...any) error {
	return fmt.Errorf("%s: %s (log: %s)", m.name, fmt.Sprintf(format, args...), m.log.Name())
}

// memory asks for runtime.MemStats after a GC.
func (m *member) memory() (memStats, error) {
	if _, err := io.WriteString(m.in, "mem\n"); err != nil {
		return memStats{}, m.errorf("ask for memory stats: %v", err)
	}
	select {
	case s := <-m.rp.mem:
		return s, nil
	case <-m.exited:
		return memStats{}, m.errorf("exited: %v", m.waitErr)
	case <-time.After(30 * time.Second):
		return memStats{}, m.errorf("no memory stats")
	}
}

// runtimeMetrics asks for the process's runtime/metrics.
func (m *member) runtimeMetrics() (map[string]float64, error) {
	if _, err := io.WriteString(m.in, "runtime\n"); err != nil {
		return nil, m.errorf("ask for runtime metrics: %v", err)
	}
	select {
	case r := <-m.rp.runtime:
		return r, nil
	case <-m.exited:
		return nil, m.errorf("exited: %v", m.waitErr)
	case <-time.After(30 * time.Second):
		return nil, m.errorf("no runtime metrics")
	}
}

// heapProfile asks for a heap profile into path and waits for it.
func (m *member) heapProfile(path string) {
	fmt.Fprintf(m.in, "heap %s\n", path)
	select {
	case <-m.rp.acks:
	case <-m.exited:
	case <-time.After(30 * time.Second):
	}
}

// status asks for the process's status line, parsed into its key=value
// fields.
func (m *member) status() (map[string]string, error) {
	if _, err := io.WriteString(m.in, "status\n"); err != nil {
		return nil, m.errorf("ask for status: %v", err)
	}
	var line string
	select {
	case line = <-m.rp.status:
	case <-m.exited:
		return nil, m.errorf("exited: %v", m.waitErr)
	case <-time.After(10 * time.Second):
		return nil, m.errorf("no status")
	}
	fields := map[string]string{}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok {
			fields[k] = v
		}
	}
	return fields, nil
}

// terminate sends SIGTERM.
func (m *member) terminate() { _ = m.cmd.Process.Signal(syscall.SIGTERM) }

// wait waits up to timeout for the process to exit, then kills it.
func (m *member) wait(timeout time.Duration) {
	select {
	case <-m.exited:
	case <-time.After(timeout):
		_ = m.cmd.Process.Kill()
		<-m.exited
	}
	m.log.Close()
}

// kill ends the process at once, if it still runs.
func (m *member) kill() {
	_ = m.cmd.Process.Kill()
	<-m.exited
	m.log.Close()
}
