package declarative

import (
	"cmp"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Conditions builds a parent's condition list from its current one, for
// State.Status. Each condition set replaces the current one of its type;
// its lastTransitionTime is kept while its status is unchanged and is now
// when the status changes, so applying the same conditions twice writes
// nothing. Conditions not set are dropped.
//
//	status.Conditions = declarative.NewConditions(site.Status.Conditions, site.Generation).
//		True("Ready", "Applied", "all children are applied").
//		List()
type Conditions struct {
	current    []metav1.Condition
	generation int64
	out        []metav1.Condition
	now        func() time.Time
}

// NewConditions starts from the parent's current conditions; generation is
// the parent's metadata.generation, recorded as each condition's
// observedGeneration.
func NewConditions(current []metav1.Condition, generation int64) *Conditions {
	return &Conditions{current: current, generation: generation, now: time.Now}
}

// True sets condition typ to True.
func (c *Conditions) True(typ, reason, message string) *Conditions {
	return c.Set(typ, metav1.ConditionTrue, reason, message)
}

// False sets condition typ to False.
func (c *Conditions) False(typ, reason, message string) *Conditions {
	return c.Set(typ, metav1.ConditionFalse, reason, message)
}

// Unknown sets condition typ to Unknown.
func (c *Conditions) Unknown(typ, reason, message string) *Conditions {
	return c.Set(typ, metav1.ConditionUnknown, reason, message)
}

// Set sets condition typ to status.
func (c *Conditions) Set(typ string, status metav1.ConditionStatus, reason, message string) *Conditions {
	cond := metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: message,
		ObservedGeneration: c.generation,
		LastTransitionTime: metav1.NewTime(c.now().Truncate(time.Second)),
	}
	for _, cur := range c.current {
		if cur.Type == typ && cur.Status == status {
			cond.LastTransitionTime = cur.LastTransitionTime
		}
	}
	for i := range c.out {
		if c.out[i].Type == typ {
			c.out[i] = cond
			return c
		}
	}
	c.out = append(c.out, cond)
	return c
}

// List returns the conditions, sorted by type.
func (c *Conditions) List() []metav1.Condition {
	out := append([]metav1.Condition(nil), c.out...) // nil, not [], when there are none
	slices.SortFunc(out, func(a, b metav1.Condition) int { return cmp.Compare(a.Type, b.Type) })
	return out
}
