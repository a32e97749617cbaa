package envtest_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/converge-dev/converge/framework/envtest"
)

// helperVariable makes TestHelperPanicsHoldingAnEnvironment run; it is set only for the
// child test process of TestProcessesDieWithTheTestBinary.
const helperVariable = "CONVERGE_ENVTEST_PANIC_HELPER"

func TestProcessesDieWithTheTestBinary(t *testing.T) {
	t.Parallel()
	requireControlPlane(t)

	// Run this test binary again, as a helper that starts an Environment and panics
	// without calling Stop.
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperPanicsHoldingAnEnvironment$")
	cmd.Env = append(os.Environ(), helperVariable+"=1")
	out, err := cmd.Output()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() == 0 {
		t.Fatalf("helper did not fail: %v\n%s", err, out)
	}
	var pids []int
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		switch fields := strings.Fields(sc.Text()); {
		case len(fields) == 3 && fields[0] == "CHILD":
			pid, _ := strconv.Atoi(fields[1])
			pids = append(pids, pid)
			t.Logf("helper's child %s has pid %d", fields[2], pid)
		case len(fields) == 2 && fields[0] == "DIR":
			t.Cleanup(func() { os.RemoveAll(fields[1]) }) // nobody called Stop
		}
	}
	if len(pids) < 2 {
		t.Fatalf("helper reported %d children, want etcd and kube-apiserver; its output:\n%s", len(pids), out)
	}
	// Pdeathsig kills them as the helper's threads exit; allow for the delivery.
	eventually(t, 10*time.Second, "the helper's children are gone", func(context.Context) error {
		for _, pid := range pids {
			if !processGone(pid) {
				return fmt.Errorf("pid %d still runs", pid)
			}
		}
		return nil
	})
}

func TestHelperPanicsHoldingAnEnvironment(t *testing.T) {
	if os.Getenv(helperVariable) == "" {
		t.Skip("helper process of TestProcessesDieWithTheTestBinary")
	}
	env := envtest.New(envtest.Options{})
	if _, err := env.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	children, _ := childProcesses(t, os.Getpid(), env.Dir())
	for _, c := range children {
		fmt.Printf("CHILD %d %s\n", c.pid, c.comm)
	}
	fmt.Printf("DIR %s\n", env.Dir())
	panic("helper: dying without Stop")
}
