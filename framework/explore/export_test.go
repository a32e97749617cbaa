package explore

import "context"

// CheckFaults is Check replaying one schedule, after the fault-free
// reference, with the faults of tokens as -converge.faults reads them
// ("lag@s0,409@w2"). It also returns how many faults of each kind the
// replayed schedule injected (not counting the runs of shrinking a
// failure).
func CheckFaults(ctx context.Context, opts Options, tokens string) (*Failure, map[FaultKind]int, error) {
	fs, err := parseFaults(tokens, len(opts.Steps))
	if err != nil {
		return nil, nil, err
	}
	e := &explorer{replayFaults: fs}
	f, err := e.check(ctx, opts)
	return f, e.stats.injected, err
}

// SendRestartedWriteLate makes the write a Restart fault meets wait until
// kube-apiserver is up again before it is answered, as when the process
// does not run meanwhile (a busy machine). The returned func undoes it.
func SendRestartedWriteLate() (undo func()) {
	afterKillHook = func(up <-chan struct{}) { <-up }
	return func() { afterKillHook = nil }
}
