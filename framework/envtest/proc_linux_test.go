package envtest_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// child is a process found in /proc.
type child struct {
	pid, pgid int
	comm      string
}

// childProcesses returns the live processes whose parent is ppid and whose command line
// mentions mark (an Environment's folder); ok is false where /proc is not available.
func childProcesses(t *testing.T, ppid int, mark string) (children []child, ok bool) {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the process has just gone
		}
		// pid (comm) state ppid pgrp …; comm may hold spaces, so split after the last ')'.
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < 0 {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) < 3 || fields[0] == "Z" {
			continue
		}
		if p, _ := strconv.Atoi(fields[1]); p != ppid {
			continue
		}
		dir := filepath.Dir(path)
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		if !strings.Contains(string(cmdline), mark) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(dir))
		pgid, _ := strconv.Atoi(fields[2])
		children = append(children, child{pid: pid, pgid: pgid, comm: s[open+1 : end]})
	}
	return children, true
}

// processGone reports whether pid no longer runs: signal 0 finds no such process, or only
// a zombie that its new parent has not reaped yet.
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && (fields[0] == "Z" || fields[0] == "X")
}
