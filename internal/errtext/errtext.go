package errtext

import (
	"bytes"
	"encoding/json"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// valueTypes are how a cause's message begins when the API server quotes
// the value it refuses after it ("Invalid value: VALUE: detail"), as
// k8s.io/apimachinery's field.Error says each type of error.
var valueTypes = []string{"Invalid value", "Unsupported value", "Duplicate value", "Not found", "Too many", "Too few"}

// Cause says c, one cause of an API server's refusal, as "field: reason:
// detail": its field path, when it has one, and its message without the
// value the server quotes ("spec.template: Invalid value: field is
// immutable"). A value the message holds is left out however short it is:
// it may be a secret (a literal environment value), and the field path
// says where it is.
func Cause(c metav1.StatusCause) string {
	msg := causeMessage(c.Message)
	if c.Field != "" {
		return c.Field + ": " + msg
	}
	return msg
}

// causeMessage returns msg, the message of a cause, without the value it
// quotes.
func causeMessage(msg string) string {
	for _, typ := range valueTypes {
		rest, ok := strings.CutPrefix(msg, typ+": ")
		if !ok {
			continue
		}
		return typ + detail(rest)
	}
	return msg
}

// detail returns ": DETAIL" from rest, "VALUE: DETAIL" or "VALUE" (no
// detail), or "" when there is none. The value is JSON as the API server
// writes it (a number, a quoted string, an object); one that is not (a Go
// value printed with %#v) ends at the last ": ".
func detail(rest string) string {
	dec := json.NewDecoder(strings.NewReader(rest))
	var v json.RawMessage
	if err := dec.Decode(&v); err == nil {
		after := rest[dec.InputOffset():]
		if d, ok := strings.CutPrefix(after, ": "); ok {
			return ": " + d
		}
		if strings.TrimSpace(after) == "" {
			return ""
		}
	}
	if i := strings.LastIndex(rest, ": "); i >= 0 {
		return ": " + rest[i+2:]
	}
	return ""
}

// Of returns err's text for people: each API server status in its chain
// (a *apierrors.StatusError, or any error with a Status method) said with
// its causes as Cause says them, without the values the server quotes,
// and the whole on one line (the lines of joined errors separated by
// "; "). It returns "" for a nil error.
func Of(err error) string {
	if err == nil {
		return ""
	}
	text := err.Error()
	for _, st := range statuses(err) {
		if st.Details == nil || len(st.Details.Causes) == 0 || !strings.Contains(text, st.Message) {
			continue
		}
		msg := st.Message
		for _, c := range st.Details.Causes {
			if c.Message == "" {
				continue
			}
			if clean := causeMessage(c.Message); clean != c.Message {
				msg = strings.ReplaceAll(msg, c.Message, clean)
			}
		}
		text = strings.ReplaceAll(text, st.Message, msg)
	}
	return oneLine(text)
}

// statuses returns the API server statuses in err's chain, following
// joined errors too.
func statuses(err error) []metav1.Status {
	var out []metav1.Status
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if s, ok := err.(apierrors.APIStatus); ok {
			out = append(out, s.Status())
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	return out
}

// oneLine joins the lines of s with "; ", leaving out blank ones.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	var b bytes.Buffer
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(line)
	}
	return b.String()
}

// Error returns err with the text Of gives it: errors.Is and errors.As see
// err through it. It returns nil for a nil error.
func Error(err error) error {
	if err == nil {
		return nil
	}
	return &shown{err: err, text: Of(err)}
}

// shown is an error said as Of says it.
type shown struct {
	err  error
	text string
}

func (e *shown) Error() string { return e.text }
func (e *shown) Unwrap() error { return e.err }
