package workqueue

import (
	"github.com/converge-dev/converge/internal/hooks"
	"github.com/converge-dev/converge/reconcile"
)

// The function of this package that framework calls through
// internal/hooks.
func init() {
	hooks.SetWorkqueue(func(q, fn any) { q.(interface{ owedAny(any) }).owedAny(fn) })
}

// owedAny is owed, for hooks.Owed: fn is a func(K, reconcile.Reason).
func (q *Queue[K]) owedAny(fn any) { q.owed(fn.(func(K, reconcile.Reason))) }
