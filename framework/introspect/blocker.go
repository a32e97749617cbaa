package introspect

import (
	"strings"
	"time"
	"unicode"

	"github.com/converge-dev/converge/reconcile"
)

// blockerLine is how Explain says b: its reason in words, its message, and for
// how long, when known.
func blockerLine(b *reconcile.Blocker, now time.Time) string {
	line := reasonWords(b.Reason) + ": " + b.Message
	if !b.Since.IsZero() {
		line += " (for " + ago(now, b.Since) + ")"
	}
	return line
}

// reasonWords spells an UpperCamelCase reason in lower case words:
// "NotReady" is "not ready"; acronyms stay whole ("CRDMissing" is "crd
// missing").
func reasonWords(reason string) string {
	var b strings.Builder
	rs := []rune(reason)
	for i, r := range rs {
		upper := unicode.IsUpper(r)
		if i > 0 && upper && (!unicode.IsUpper(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
			b.WriteByte(' ')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
