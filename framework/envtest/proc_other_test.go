//go:build !linux

package envtest_test

import "testing"

// child is a process found in /proc.
type child struct {
	pid, pgid int
	comm      string
}

// childProcesses is not available without /proc.
func childProcesses(t *testing.T, ppid int, mark string) (children []child, ok bool) {
	return nil, false
}

// processGone is not available without /proc.
func processGone(pid int) bool { return true }
