package envtest

import (
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// On Linux every child process is started with Pdeathsig SIGKILL, so it dies with the
// process that started it even when that process panics or is killed, and in its own
// process group (Setpgid), so a terminal's Ctrl-C does not reach it first and
// terminate/kill reach anything it forks.
//
// Pdeathsig fires when the OS thread that forked the child exits, not when the process
// does (golang/go#27505), and the Go runtime may end an idle thread. So every child is
// forked by one goroutine that locks itself to its OS thread and never returns: the
// spawner, started on first use and serving requests over spawnRequests.

// spawnRequest asks the spawner to start cmd and answer on errc.
type spawnRequest struct {
	cmd  *exec.Cmd
	errc chan<- error
}

var (
	spawnerOnce   sync.Once
	spawnRequests chan spawnRequest
)

// startProcess starts cmd from the spawner's locked OS thread.
func startProcess(cmd *exec.Cmd) error {
	spawnerOnce.Do(func() {
		spawnRequests = make(chan spawnRequest)
		go spawner(spawnRequests)
	})
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	errc := make(chan error, 1)
	spawnRequests <- spawnRequest{cmd: cmd, errc: errc}
	return <-errc
}

// spawner starts the requested commands. It never unlocks its thread and never returns,
// so the thread lives as long as the process.
func spawner(requests <-chan spawnRequest) {
	runtime.LockOSThread()
	for r := range requests {
		r.errc <- r.cmd.Start()
	}
	select {} // unreachable: requests is never closed
}

// terminate sends SIGTERM to p's process group.
func terminate(p *os.Process) error { return signalGroup(p, syscall.SIGTERM) }

// kill sends SIGKILL to p's process group.
func kill(p *os.Process) error { return signalGroup(p, syscall.SIGKILL) }

// signalGroup signals the process group that p leads, falling back to p alone.
func signalGroup(p *os.Process, sig syscall.Signal) error {
	if err := syscall.Kill(-p.Pid, sig); err == nil {
		return nil
	}
	return p.Signal(sig)
}
