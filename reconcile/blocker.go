package reconcile

import "time"

// Blocker is why an object is not converged after a reconcile that did
// what it could: what it waits for, what is not ready, what failed. A
// reconcile says so with framework.NoteBlocked, and the endpoint, its page
// and converge explain show it, and count the object as not converged
// until a later reconcile notes no Blocker. A reconciler that also writes a
// condition (a Ready condition False) should note the same reason and
// message, so that every view says one thing; package declarative does.
type Blocker struct {
	// Reason is the cause in one UpperCamelCase word, as a condition's
	// reason ("Waiting", "NotReady", "ChildFailed"). Explain spells it in
	// lower case words ("waiting", "not ready", "child failed"). Required:
	// a Blocker without one clears the note.
	Reason string `json:"reason"`
	// Message says what, for people ("Deployment web waits for Job
	// migrate (succeeded)"). Messages longer than 512 bytes are cut.
	Message string `json:"message"`
	// Since is when the object began to be blocked for this reason and
	// message. Zero means not known.
	Since time.Time `json:"since,omitzero"`
}
