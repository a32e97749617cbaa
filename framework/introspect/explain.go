package introspect

import (
	"fmt"
	"strings"
	"time"

	"github.com/converge-dev/converge/reconcile"
)

// stuckAfter is how long a reconcile may run before Explain asks whether it
// ignores its context.
const stuckAfter = time.Minute

// Explain says in a few lines where the object stands in the controller and
// why, as converge explain and the debug page print it, and whether it is
// converged: its last reconcile succeeded (or asked for a RequeueAfter),
// noted no Blocker (framework.NoteBlocked), nothing is queued, running, failing or
// delayed for a retry, and the informer still holds the object (one
// reconciled, then deleted, is gone). now is the time the lines count
// ages from.
func (s KeyStatus) Explain(now time.Time) (lines []string, converged bool) {
	var last *ReconcileRecord
	if len(s.History) > 0 {
		last = &s.History[0]
	}
	lastError := ""
	if last != nil && last.Error != "" {
		lastError = ": last error: " + last.Error
	}
	failures := ""
	if s.Queue.Retries > 0 {
		failures = fmt.Sprintf(" after %d failure%s", s.Queue.Retries, plural(s.Queue.Retries))
	}
	if s.Unwatched {
		return []string{fmt.Sprintf("not watched: controller %s does not watch cluster %s (not engaged, or the controller's scope is the manager's own cluster)", s.Controller, s.Cluster)}, false
	}
	lines = s.ClusterHealth.held(now)
	if line, here := s.Shard.explain(); !here {
		return []string{line}, false
	} else if line != "" {
		lines = append(lines, line)
	}
	switch {
	case s.InFlight != nil:
		line := fmt.Sprintf("in flight for %s on worker %d", age(time.Duration(s.InFlight.RunningSeconds*float64(time.Second))), s.InFlight.Worker)
		if s.InFlight.RunningSeconds >= stuckAfter.Seconds() {
			line += " (reconcile ignores its context?)"
		}
		lines = append(lines, line)
	case s.Queue.Queued:
		line := fmt.Sprintf("queued (%s) since %s", s.Queue.Reason, ago(now, s.Queue.Since))
		if s.Queue.Replay {
			line += " at replay priority (a resync or the initial list: behind real changes)"
		}
		lines = append(lines, line+failures+lastError)
	case s.Queue.Delayed:
		since := ""
		if last != nil {
			since = " since " + ago(now, last.Started.Add(time.Duration(last.DurationSeconds*float64(time.Second))))
		}
		lines = append(lines, fmt.Sprintf("delayed (%s)%s, next attempt in %s%s%s", s.Queue.DelayReason, since, age(s.Queue.Due.Sub(now)), failures, lastError))
	case last == nil:
		lines = append(lines, s.notReconciled())
	}
	if s.InFlight == nil && !s.Queue.Queued && !s.Queue.Delayed && s.Informer.Err != nil && (last != nil || s.Cached) {
		lines = append(lines, "informer unhealthy: "+s.Informer.Err.Error())
	}
	if last != nil {
		if b := last.Blocked; b != nil && !saysBlocker(last.Error, b.Message) {
			lines = append(lines, blockerLine(b, now))
		}
		finished := last.Started.Add(time.Duration(last.DurationSeconds * float64(time.Second)))
		switch last.Result {
		case resultTerminal:
			lines = append(lines, fmt.Sprintf("failed %s ago with a terminal error, not retried until the object changes: %s", age(now.Sub(finished)), strings.TrimPrefix(last.Error, "terminal error: ")))
		case resultError, resultPanic:
			if s.InFlight != nil || s.Queue.Queued || !s.Queue.Delayed {
				lines = append(lines, fmt.Sprintf("last reconcile failed %s ago (%s)%s", age(now.Sub(finished)), last.Result, lastError))
			}
		default:
			line := fmt.Sprintf("last reconciled %s ago: %s in %s (%s)", age(now.Sub(finished)), last.Result, age(time.Duration(last.DurationSeconds*float64(time.Second))), last.Reason)
			if last.RequeueAfterSeconds > 0 {
				line += fmt.Sprintf(", requeued after %s", age(time.Duration(last.RequeueAfterSeconds*float64(time.Second))))
			}
			if !s.Cached && s.Informer.Synced && s.InFlight == nil && !s.Queue.Queued {
				// Reconciled, then deleted: nothing to converge.
				lines = append(lines, fmt.Sprintf("gone: %s holds no %s %s any more (deleted, or out of the controller's selection)", s.Informer.Description, s.Kind.Kind, s.key()), line)
				break
			}
			lines = append(lines, line)
			converged = s.InFlight == nil && !s.Queue.Queued && last.Blocked == nil && s.Queue.Retries == 0 &&
				(!s.Queue.Delayed || s.Queue.DelayReason == reconcile.ReasonRequeue)
		}
	}
	if converged {
		lines[len(lines)-1] = "converged: " + lines[len(lines)-1]
	}
	return lines, converged
}

// held says that cluster h, not ready, holds its keys; nil when h is nil.
func (h *ClusterStatus) held(now time.Time) []string {
	if h == nil {
		return nil
	}
	line := fmt.Sprintf("held: cluster %s is %s since %s", h.Name, h.State, ago(now, h.Since))
	if h.Error != "" {
		line += ": " + h.Error
	}
	return []string{line + "; its keys wait until a probe passes"}
}

// notReconciled says why the history holds no reconcile of the key.
func (s KeyStatus) notReconciled() string {
	switch {
	case !s.Cached && !s.Informer.Synced:
		cause := "its initial list is in progress"
		if s.Informer.Err != nil {
			cause = s.Informer.Err.Error()
		}
		return fmt.Sprintf("never seen: the informer for %s is not synced: %s", s.Kind, cause)
	case !s.Cached && s.Scope == ScopeNamespaced && s.Namespace == "":
		return fmt.Sprintf("never seen: %s is namespaced and no namespace was given: name it NAMESPACE/%s", s.Kind.Kind, s.Name)
	case !s.Cached && s.Scope == ScopeCluster && s.Namespace != "":
		return fmt.Sprintf("never seen: %s is cluster-scoped and a namespace was given: name it %s, without %s/", s.Kind.Kind, s.Name, s.Namespace)
	case !s.Cached && len(s.OtherClusters) > 0:
		return fmt.Sprintf("never seen: %s holds no %s %s in the manager's own cluster; the controller also watches cluster%s %s: name one (converge explain --cluster NAME)",
			s.Informer.Description, s.Kind.Kind, s.key(), plural(len(s.OtherClusters)), strings.Join(s.OtherClusters, ", "))
	case !s.Cached:
		return fmt.Sprintf("never seen: %s holds no %s %s (no such object, or outside the controller's selection)", s.Informer.Description, s.Kind.Kind, s.key())
	case s.ControllerState != "running":
		return fmt.Sprintf("not reconciled yet: controller %s is %s%s", s.Controller, s.ControllerState, stateHint(s.ControllerState))
	default:
		return "not reconciled recently (the history keeps the most recently reconciled keys only)"
	}
}

// explain says where the object falls in the ring, when it matters, and
// whether this member reconciles it (here): false when another member
// holds its bucket, or none does.
func (sh *ShardStatus) explain() (line string, here bool) {
	if sh == nil {
		return "", true
	}
	if sh.Bucket < 0 {
		return fmt.Sprintf("sharded by %s: not cached here, so its bucket cannot be told; this member serves buckets %v of %d: another member holds it, or there is no such object",
			sh.Buckets.By, sh.Serving, sh.Buckets.Count), false
	}
	bucket := fmt.Sprintf("sharded: bucket %d of %d (by %s)", sh.Bucket, sh.Buckets.Count, sh.Buckets.By)
	switch sh.State {
	case "serving":
		return "", true
	case "syncing":
		return bucket + " is claimed here and still listing: its keys wait until it has synced", true
	case "draining":
		return bucket + " is being handed over: its keys are no longer dispatched here", true
	}
	if sh.Holder != "" {
		return bucket + " is held by member " + sh.Holder + ", which reconciles it", false
	}
	return bucket + " is held by no live member yet: it is served once a member claims and lists it", false
}

// saysBlocker reports whether the error text of a reconcile already says
// the message of its blocker (a terminal configuration error reported as
// both, say), so that Explain says it once: the error holds the message's
// first 128 bytes, cut as the history cuts both.
func saysBlocker(errText, msg string) bool {
	if errText == "" || msg == "" {
		return false
	}
	msg = strings.TrimSuffix(msg, Truncated)
	return strings.Contains(errText, msg[:min(len(msg), 128)])
}

func (s KeyStatus) key() string {
	if s.Namespace == "" {
		return s.Name
	}
	return s.Namespace + "/" + s.Name
}

func stateHint(state string) string {
	switch state {
	case "pending":
		return " (the manager has not started it, or this process is not the leader)"
	case "syncing":
		return " (waiting for its informers to sync)"
	}
	return ""
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// ago is how long before now t was.
func ago(now, t time.Time) string { return age(now.Sub(t)) }

// age spells d for people: "350ms", "12s", "2m10s".
func age(d time.Duration) string {
	switch {
	case d < 0:
		d = 0
	case d >= time.Second:
		d = d.Round(time.Second)
	default:
		d = d.Round(time.Millisecond)
	}
	return d.String()
}
