package explore

import "context"

// CheckFaults is Check replaying one schedule, after the fault-free
// reference, with the faults of tokens as -converge.faults reads them
// ("lag@s0,409@w2").
func CheckFaults(ctx context.Context, opts Options, tokens string) (*Failure, error) {
	fs, err := parseFaults(tokens, len(opts.Steps))
	if err != nil {
		return nil, err
	}
	return (&explorer{replayFaults: fs}).check(ctx, opts)
}
