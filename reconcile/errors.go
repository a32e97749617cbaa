package reconcile

import "errors"

// TerminalError marks a reconcile error that retrying cannot fix, such as an
// invalid spec: the controller logs it and counts it, but does not retry the key
// until the object (or something mapped to it) changes again.
//
// Create one with Terminal; detect one with IsTerminal, which also sees through
// wrapping with fmt.Errorf("...: %w", err).
type TerminalError struct {
	Err error
}

// Terminal wraps err so the controller does not retry it. Terminal(nil) returns nil.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return &TerminalError{Err: err}
}

// Error returns the wrapped error's text, prefixed with "terminal error: ".
func (e *TerminalError) Error() string {
	if e.Err == nil {
		return "terminal error"
	}
	return "terminal error: " + e.Err.Error()
}

// Unwrap returns the wrapped error.
func (e *TerminalError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, &TerminalError{}) true for any terminal error.
func (e *TerminalError) Is(target error) bool {
	_, ok := target.(*TerminalError)
	return ok
}

// IsTerminal reports whether err or any error it wraps is a TerminalError.
func IsTerminal(err error) bool {
	var t *TerminalError
	return errors.As(err, &t)
}
