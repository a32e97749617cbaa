package declarative

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/reconcile"
)

// ReadyCondition is the type of the condition converge sets in the status
// of a parent that declares any Child, when State.Status has a conditions
// field: True, reason ChildrenReadyReason, once every child is ready; False
// otherwise, with one of the reasons below and a message naming the first
// child in the way. A Ready condition Desired sets is replaced. A
// declaration converge cannot follow (ChildGraphReason) sets it on any
// parent whose status has conditions.
//
// Whenever it is False, the reconcile also notes it, same reason and
// message, as its reconcile.Blocker: converge explain and the manager's
// debug page then say what the condition says, and count the parent as
// not converged.
const ReadyCondition = "Ready"

// Reasons of ReadyCondition. Waiting and NotReady messages end with the time
// the child started waiting ("since 2026-01-02T15:04:05Z"), kept while it
// waits for the same thing. What a child waits for is its kind's built-in
// readiness (Complete, Available, Ready, Bound, load balancer ingress,
// created) or the words its ReadyWhen gives.
const (
	// ChildrenReadyReason: every child is applied and ready.
	ChildrenReadyReason = "ChildrenReady"
	// WaitingReason: a child is not applied yet because a child it is After
	// is not ready ("Deployment web waits for Job migrate (succeeded)"),
	// or a child no longer declared is not deleted yet because another
	// being deleted is After it ("ConfigMap config is deleted once Job
	// migrate, which is After it, is gone"), or the deletion of the
	// parent waits for a child to be gone ("deletion waits for Deployment
	// web (Terminating, finalizer example.com/hold)").
	WaitingReason = "Waiting"
	// NotReadyReason: every child is applied and one is not ready yet
	// ("Deployment web is not ready yet (Available)"), or is being deleted
	// ("... (Available): it is being deleted (Terminating, finalizer
	// example.com/hold)").
	NotReadyReason = "NotReady"
	// ChildFailedReason: a child will not become ready without a change: it
	// failed ("Job migrate failed (BackoffLimitExceeded: Job has reached
	// the specified backoff limit)", "Deployment web failed
	// (ProgressDeadlineExceeded: ...)", the words of its FailedWhen), its
	// ReadyWhen panicked ("Deployment web is not ready (serving): its
	// ReadyWhen panicked: ..."), or its apply failed ("ConfigMap config
	// could not be applied: the API server answered 422 Invalid: ...").
	ChildFailedReason = "ChildFailed"
	// ChildGraphReason: the State Desired returned cannot be applied as
	// declared: a child of a kind not in Options.ChildKinds, without a
	// name, not convertible, declared twice, outside the manager's cache
	// (its namespace, or the label or field selection of its kind), in
	// another namespace than its parent's in a controller sharded by
	// namespace; children whose order cannot be followed (a cycle, a
	// child After one not declared or of a kind not in Options.ChildKinds);
	// State.KeepChildren with Children. Nothing is applied or pruned, the
	// reconcile fails terminally (it is not retried until the parent or a
	// child changes), and a Warning Event of this reason is recorded on the
	// parent once per change of the error: not again while the parent's
	// Ready condition already reports it, so neither the reconcile its own
	// status write brings about nor a restart repeats it (a parent whose
	// status has no conditions gets one per process).
	ChildGraphReason = "InvalidChildGraph"
	// DesiredFailedReason: Desired returned an error, or panicked; nothing
	// is applied or deleted. The message is the error (without the values
	// the API server quotes, on one line; a terminal error's cause), or
	// "Desired panicked: " and the first line of the panic's value. Set
	// on any parent whose status can hold conditions, with a Warning Event
	// of this reason once per change of the error, as for
	// ChildGraphReason. The error then goes to the framework: retried with
	// backoff unless terminal, and a panic is counted and logged, with its
	// stack, as any reconcile panic.
	DesiredFailedReason = "DesiredFailed"
)

// readyState is the Ready condition a parent's children call for, before
// the time a wait began is added to its message.
type readyState struct {
	status          metav1.ConditionStatus
	reason, message string
	// since reports whether the message gets the time the state began.
	since bool
}

// summary returns the Ready condition the children call for: the first
// failed child, else the first waiting one, else the first not ready.
func (g *graph) summary() readyState {
	for _, v := range g.vertices {
		switch v.state.failure {
		case failedItself:
			msg := v.name + " failed"
			if v.state.why != "" {
				msg += " (" + v.state.why + ")"
			}
			return readyState{metav1.ConditionFalse, ChildFailedReason, msg, false}
		case failedApply:
			return readyState{metav1.ConditionFalse, ChildFailedReason, fmt.Sprintf("%s could not be applied: %s", v.name, v.state.why), false}
		case failedCheck:
			return readyState{metav1.ConditionFalse, ChildFailedReason, fmt.Sprintf("%s is not ready (%s): %s", v.name, v.state.what, v.state.why), false}
		}
	}
	for _, v := range g.vertices {
		if v.kind != "" {
			return readyState{metav1.ConditionFalse, WaitingReason, fmt.Sprintf("%s waits for %s", v.name, v.kind), true}
		}
		if v.waitsFor >= 0 {
			d := g.vertices[v.waitsFor]
			return readyState{metav1.ConditionFalse, WaitingReason, fmt.Sprintf("%s waits for %s (%s%s)", v.name, d.name, d.state.what, d.rerunNote()), true}
		}
	}
	for _, v := range g.vertices {
		if !v.state.ready {
			msg := fmt.Sprintf("%s is not ready yet (%s%s)", v.name, v.state.what, v.rerunNote())
			if v.state.why != "" {
				msg += ": " + v.state.why
			}
			return readyState{metav1.ConditionFalse, NotReadyReason, msg, true}
		}
	}
	msg := fmt.Sprintf("all %d children are ready", len(g.vertices))
	var notes []string
	for _, v := range g.vertices {
		if v.reruns {
			notes = append(notes, v.name+" "+rerunWords)
		}
	}
	if len(notes) > 0 {
		msg += " (" + strings.Join(notes, "; ") + ")"
	}
	return readyState{metav1.ConditionTrue, ChildrenReadyReason, msg, false}
}

// rerunNote is what the parenthesis after v's readiness adds when v
// reruns ("Complete; it runs again ..."), or nothing.
func (v vertex) rerunNote() string {
	if !v.reruns {
		return ""
	}
	return "; it " + rerunWords
}

// readyCondition returns the Ready condition st calls for on parent, the
// time a wait began in its message (kept from parent's condition while the
// wait lasts), and, when it is not True, the same as the reconcile.Blocker
// the reconcile notes: the condition, converge explain and the debug page
// say one thing.
func readyCondition(parent object.Object, st readyState) (metav1.Condition, reconcile.Blocker) {
	current := parentConditions(parent)
	cond := NewConditions(current, parent.GetGeneration()).Set(ReadyCondition, st.status, st.reason, st.message).out[0]
	var since time.Time
	if st.since {
		cond.Message, since = sinceMessage(current, cond, st.message)
	}
	if cond.Status == metav1.ConditionTrue {
		return cond, reconcile.Blocker{}
	}
	return cond, reconcile.Blocker{Reason: cond.Reason, Message: cond.Message, Since: since}
}

// withReadyCondition returns status with cond in its conditions list, in
// place of any Ready condition there. A status without a conditions field
// is returned as it is.
func withReadyCondition(status any, cond metav1.Condition) (any, error) {
	if !hasConditions(status) {
		return status, nil
	}
	b, err := json.Marshal(status)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	c, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&cond)
	if err != nil {
		return nil, err
	}
	list, _ := m["conditions"].([]any)
	list = slices.DeleteFunc(slices.Clone(list), func(c any) bool {
		cm, ok := c.(map[string]any)
		return ok && cm["type"] == ReadyCondition
	})
	list = append(list, c)
	slices.SortStableFunc(list, func(a, b any) int {
		am, _ := a.(map[string]any)
		bm, _ := b.(map[string]any)
		as, _ := am["type"].(string)
		bs, _ := bm["type"].(string)
		return cmp.Compare(as, bs)
	})
	m["conditions"] = list
	return m, nil
}

// sinceFormat is how the time a wait began ends a message.
const sinceFormat = "2006-01-02T15:04:05Z"

// sinceMessage returns msg with the time the wait it describes began, and
// that time: the one the parent's Ready condition already gives for the
// same wait, or the new condition's transition time.
func sinceMessage(current []metav1.Condition, cond metav1.Condition, msg string) (string, time.Time) {
	prefix := msg + " since "
	for _, c := range current {
		if c.Type == ReadyCondition && c.Status == cond.Status && c.Reason == cond.Reason && strings.HasPrefix(c.Message, prefix) {
			if t, err := time.Parse(sinceFormat, strings.TrimPrefix(c.Message, prefix)); err == nil {
				return c.Message, t
			}
		}
	}
	t := cond.LastTransitionTime.UTC()
	return prefix + t.Format(sinceFormat), t
}

// parentConditions returns the conditions in parent's status.
func parentConditions(parent object.Object) []metav1.Condition {
	live, err := toMap(parent)
	if err != nil {
		return nil
	}
	raw, _, _ := unstructured.NestedSlice(live, "status", "conditions")
	if len(raw) == 0 {
		return nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil
	}
	var out []metav1.Condition
	if json.Unmarshal(b, &out) != nil {
		return nil
	}
	return out
}

// hasConditions reports whether status has a conditions field: a key of
// that name in its JSON form, or a struct field whose JSON name it is (left
// out when empty).
func hasConditions(status any) bool {
	if m, ok := status.(map[string]any); ok {
		_, has := m["conditions"]
		return has
	}
	if u, ok := status.(*unstructured.Unstructured); ok {
		_, has := u.Object["conditions"]
		return has
	}
	t := reflect.TypeOf(status)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return false
	}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "conditions" {
			return true
		}
	}
	return false
}

// setReadyCondition writes cond as parent's Ready condition when the
// reconcile has no State.Status to write it with (Desired failed, or the
// parent is being deleted), on a parent whose status can hold conditions
// (see canHoldConditions): a JSON merge patch of the status subresource
// holding the parent's conditions as the cache shows them with cond in
// place of its Ready condition, on condition that the parent is unchanged
// since (its resourceVersion), so that no other condition is lost. A
// parent changed meanwhile is reconciled again by its change; one gone
// needs nothing.
func (d *Declarative[T]) setReadyCondition(ctx context.Context, parent T, cond metav1.Condition) error {
	current := parentConditions(parent)
	for _, c := range current {
		if c.Type == ReadyCondition && c.Status == cond.Status && c.Reason == cond.Reason && c.Message == cond.Message {
			return nil
		}
	}
	if len(current) == 0 && !canHoldConditions(parent) {
		return nil
	}
	list := slices.DeleteFunc(slices.Clone(current), func(c metav1.Condition) bool { return c.Type == ReadyCondition })
	list = append(list, cond)
	slices.SortStableFunc(list, func(a, b metav1.Condition) int { return cmp.Compare(a.Type, b.Type) })
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": parent.GetUID(), "resourceVersion": parent.GetResourceVersion()},
		"status":   map[string]any{"conditions": list},
	})
	if err != nil {
		return err
	}
	err = d.client.Status().Patch(ctx, d.objectRef(parent), types.MergePatchType, patch, client.FieldManager(d.opts.FieldManager))
	switch {
	case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return nil
	}
	return fmt.Errorf("write the Ready condition of %s %s: %w", d.parentGVK.Kind, key(parent.GetNamespace(), parent.GetName()), err)
}

// canHoldConditions reports whether parent's status has a conditions
// field: its Go type's Status field has one (see hasConditions), or,
// unstructured, its status holds one.
func canHoldConditions(parent object.Object) bool {
	if u, ok := parent.(*unstructured.Unstructured); ok {
		_, has, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "conditions")
		return has
	}
	t := reflect.TypeOf(parent)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	f, ok := t.FieldByName("Status")
	return ok && hasConditions(reflect.New(f.Type).Interface())
}
