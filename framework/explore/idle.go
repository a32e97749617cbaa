package explore

import (
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/internal/seam"
)

// idle returns "" when mgr's controllers are converged: every informer
// synced and watching, every controller running, nothing queued or in
// flight, and no key whose last reconcile failed (a key that noted a
// Blocker counts as converged: it did all it could). Otherwise it says
// what is not. What the plane knows of the watches' events on their way
// is plane.caughtUp's. lastRead describes an informer's last list or
// watch request, when it is not watching (see plane.lastRead).
func idle(mgr *framework.Manager, lastRead func(schema.GroupVersionKind) string) string {
	p := seam.Provider(mgr)
	now := time.Now()
	st := p.State(now)
	var reasons []string
	for _, inf := range st.Informers {
		switch {
		case !inf.Synced:
			reasons = append(reasons, fmt.Sprintf("informer %s has not synced", inf.Description))
		case inf.Err != nil:
			reasons = append(reasons, fmt.Sprintf("informer %s has not watched again since its last list or watch failed: %v%s", inf.Description, inf.Err, paren(lastRead(inf.Kind))))
		case !inf.Watching:
			// Its watch request is being sent again (client-go retries a
			// reset connection before the informer sees an error), or its
			// reflector waits to list again (client-go backs off up to
			// about a minute after failed lists): events committed
			// meanwhile have not reached the cache.
			reasons = append(reasons, fmt.Sprintf("informer %s has no open watch%s", inf.Description, paren(lastRead(inf.Kind))))
		}
	}
	for _, c := range st.Controllers {
		if c.State != "running" {
			reasons = append(reasons, fmt.Sprintf("controller %q is %s", c.Name, c.State))
		}
		if n := c.Queue.Normal.Depth + c.Queue.Replay.Depth; n > 0 {
			reasons = append(reasons, fmt.Sprintf("controller %q has %d keys queued", c.Name, n))
		}
		for _, k := range c.InFlight {
			reasons = append(reasons, fmt.Sprintf("controller %q is reconciling %s/%s", c.Name, k.Namespace, k.Name))
		}
	}
	for _, c := range p.Controllers() {
		for _, m := range c.Unconverged() {
			ks := c.Key(m.Key, now)
			if ks.InFlight != nil || len(ks.History) == 0 {
				continue
			}
			switch last := ks.History[0]; last.Result {
			case "error", "terminal", "panic":
				retry := "waiting for a retry"
				if !ks.Queue.Delayed && !ks.Queue.Queued {
					retry = "not retried"
				}
				reasons = append(reasons, fmt.Sprintf("controller %q: the last reconcile of %s failed (%s, %s): %s", c.Name(), m.Key, last.Result, retry, last.Error))
			}
		}
	}
	return summary(reasons)
}

// paren returns " (s)", or "" for an empty s.
func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

func apiConflict(req request) error {
	return apierrors.NewConflict(schema.GroupResource{Group: req.kind.Group, Resource: req.kind.Kind}, req.name, fmt.Errorf("explore: injected conflict"))
}

func apiInternal(req request) error {
	return apierrors.NewInternalError(fmt.Errorf("explore: injected server error on %s", req))
}

// relists returns how often the informers of mgr's cache have listed.
func relists(mgr *framework.Manager) int64 {
	var n int64
	for _, inf := range seam.Provider(mgr).Informers() {
		n += inf.Relists
	}
	return n
}
