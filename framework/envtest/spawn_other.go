//go:build !linux

package envtest

import (
	"os"
	"os/exec"
	"syscall"
)

// Outside Linux there is no Pdeathsig: children are stopped by Stop, and a process that
// dies without calling it leaves them running.

// startProcess starts cmd.
func startProcess(cmd *exec.Cmd) error { return cmd.Start() }

// terminate asks p to exit, killing it where signals other than kill are not supported.
func terminate(p *os.Process) error {
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return p.Kill()
	}
	return nil
}

// kill kills p.
func kill(p *os.Process) error { return p.Kill() }
