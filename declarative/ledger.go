package declarative

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/object"
)

// ledger records which children converge created, or adopted, that no
// owner reference can tie to their parent (see labelLinked), in the
// parent's LedgerAnnotation: the parent's own UID, then for each child
// its UID as the API server returned it, by kind, namespace and name. A UID
// is assigned by the server to one object and never reused, so an object
// whose UID the ledger lists is provably the child converge wrote; labels
// only find the candidates. A ledger whose first field is not the parent's
// UID (copied from another parent with its YAML) lists nothing.
//
// A child is recorded before it exists too: converge writes a claim (a
// random nonce) to the ledger, creates the child carrying it in
// ClaimAnnotation, and then records the UID and drops the claim. A crash
// between the create and the record leaves a child whose claim the ledger
// holds, still provably the parent's. Each name has at most one UID entry
// and one claim, so a child re-created replaces its entry rather than
// adding one.
//
// The annotation is written with a field manager of its own (see
// ledgerManager), read from the API server and written back with its
// resourceVersion as a precondition, so that a write never drops another's.
// Until the cache's copy of the parent shows a write, ledger remembers it
// and applies it over the annotation.
//
// It is safe for concurrent use.
type ledger struct {
	// pending holds the entries this process wrote that the annotation may
	// not show yet: child ID to value (a UID, a claim "?nonce", or "" for
	// an entry removed).
	pending unshown
}

// parseLedger returns the entries of parent's annotation, child ID to
// value; none when the annotation is not parent's own.
func parseLedger(parent metav1.Object) map[string]string {
	fields := strings.Fields(parent.GetAnnotations()[LedgerAnnotation])
	out := map[string]string{}
	if len(fields) == 0 || fields[0] != string(parent.GetUID()) {
		return out
	}
	for _, f := range fields[1:] {
		if v, id, ok := strings.Cut(f, "="); ok && v != "" && id != "" {
			if strings.HasPrefix(v, "?") {
				id = claimKey(id)
			}
			out[id] = v
		}
	}
	return out
}

// claimKey is the key of the claim of child id in a ledger's entries (a
// child has a UID entry and a claim entry, each optional).
func claimKey(id string) string { return "?" + id }

// formatLedger is the annotation value of parent with entries.
func formatLedger(parent types.UID, entries map[string]string) string {
	ids := slices.Sorted(maps.Keys(entries))
	var b strings.Builder
	b.WriteString(string(parent))
	for _, id := range ids {
		b.WriteString(" " + entries[id] + "=" + strings.TrimPrefix(id, "?"))
	}
	return b.String()
}

// recorded returns the entries of parent's ledger: its annotation, with
// this process's writes the annotation does not show yet. Writes the
// annotation shows are forgotten.
func (l *ledger) recorded(parent metav1.Object) map[string]string {
	return l.pending.over(parent.GetUID(), parseLedger(parent))
}

// holds reports whether parent's ledger records obj, read in cluster (""
// for the parent's own), among that cluster's entries: its UID, or the
// claim it was created with. An entry of another cluster proves nothing:
// two clusters may be one API server (namespaces as clusters), where an
// object is seen from both.
func (l *ledger) holds(parent metav1.Object, cluster string, obj metav1.Object) bool {
	uid, claim := string(obj.GetUID()), obj.GetAnnotations()[ClaimAnnotation]
	if uid == "" {
		return false
	}
	for id, v := range l.recorded(parent) {
		if clusterOf(strings.TrimPrefix(id, "?")) == cluster && (v == uid || (claim != "" && v == "?"+claim)) {
			return true
		}
	}
	return false
}

// shows reports whether parent's annotation itself (not this process's
// memory) records child id with uid, and no claim of it.
func shows(parent metav1.Object, id string, uid types.UID) bool {
	entries := parseLedger(parent)
	_, claimed := entries[claimKey(id)]
	return entries[id] == string(uid) && !claimed
}

// claimOf returns the claim parent's ledger holds for child id, or "".
func (l *ledger) claimOf(parent metav1.Object, id string) string {
	return strings.TrimPrefix(l.recorded(parent)[claimKey(id)], "?")
}

// note remembers that parent's ledger gets changes.
func (l *ledger) note(parent types.UID, changes map[string]string) { l.pending.note(parent, changes) }

// forget drops what is remembered of parent, which is gone.
func (l *ledger) forget(parent types.UID) { l.pending.forget(parent) }

// newClaim returns a random claim nonce.
func newClaim() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// ledgerManager owns LedgerAnnotation on parents, apart from the fields
// the reconciler applies.
func (d *Declarative[T]) ledgerManager() string { return d.opts.FieldManager + "-ledger" }

// record writes changes (child ID to a UID, a claim "?nonce", or "" to drop
// the entry) to parent's ledger: it reads the parent from the API server,
// applies the changes and this process's other unshown writes over its
// annotation, and writes the annotation back on condition that the parent
// is unchanged (its UID and resourceVersion), again on a conflict. A parent
// gone (deleted, or replaced by another of its name) is not an error.
func (d *Declarative[T]) record(ctx context.Context, parent object.Object, changes map[string]string) error {
	d.ledger.note(parent.GetUID(), changes)
	return d.writeAnnotation(ctx, parent, "the children", LedgerAnnotation, d.ledgerManager(), func(fresh metav1.Object) string {
		entries := d.ledger.recorded(fresh)
		if len(entries) == 0 {
			return ""
		}
		return formatLedger(parent.GetUID(), entries)
	})
}
