package declarative

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/object"
)

// Options configures a declarative reconciler.
type Options struct {
	// ChildKinds holds one example object of every kind of child (e.g.
	// &appsv1.Deployment{}). Those kinds are watched, so changes to children
	// reconcile their parent, and searched when pruning. Required.
	ChildKinds []object.Object

	// RequiredKinds holds an example of each child kind (listed in
	// ChildKinds too) the API server must serve when the controller starts:
	// the controller waits for the kind's informer to sync, as for its own
	// kind, and fails to start (stopping the manager) when it has not
	// synced after the cache's SyncTimeout (a custom resource whose CRD is
	// not installed, say).
	//
	// Zero means every child kind is optional. A kind the API server
	// serves when the controller starts is watched at once, and the
	// controller waits for it as for a required one; the kinds of
	// Kubernetes itself always are. A kind it does not serve is watched
	// once it does (its CRD installed later; discovery is asked again with
	// a backoff up to 30 seconds, see framework.WhenServed), without a
	// restart, and meanwhile holds nothing back: a parent that declares no
	// child of it converges, and one that does applies its other children
	// and reports, as ReadyCondition with reason WaitingReason, that the
	// child waits for the kind's CustomResourceDefinition; children After
	// it wait too. Such a parent is reconciled again once the kind is
	// watched. An optional kind the API server stops serving while the
	// controller runs (its CRD deleted) is handled as one missing at the
	// start: its informer stops, so the manager stays ready, the parents
	// whose children of it could not be applied are reconciled again and
	// report that they wait for it, and it is watched again once served.
	// A required kind that goes away is not: its informer fails, and the
	// manager's readiness with it, until it is served again.
	RequiredKinds []object.Object

	// FieldManager owns the fields converge applies, and labels the children.
	// Zero means "converge-" followed by the parent kind in lower case.
	FieldManager string

	// Finalizer is the name of the finalizer added when cleanup is needed:
	// a domain-qualified name, as the API server requires
	// ("example.com/cleanup": a DNS subdomain, a slash, and a name of at
	// most 63 letters, digits, '-', '_' or '.', starting and ending with a
	// letter or digit). New refuses another. Zero means "converge.dev/"
	// followed by FieldManager, made such a name (characters it does not
	// allow become '_', cut to 63).
	Finalizer string

	// Conflict sets how a declared child whose object is someone else's is
	// reported on the parent. The zero value is the default of each field.
	Conflict ConflictOptions
}

// ConflictOptions sets the Warning Event converge records on a parent, and
// the ChildConflictCondition condition it sets, for each declared child
// whose object is someone else's (see the package documentation). The
// reconcile's error is worded the default way whatever they say.
type ConflictOptions struct {
	// Reason is the reason of the Event and of the condition: UpperCamelCase
	// letters and digits, at most 128 characters ("ErrResourceExists").
	// Zero means ChildConflictReason.
	Reason string

	// Note returns the Event's note (cut to 1024 bytes) and the condition's
	// message (several conflicts' notes joined with "; "). It must not
	// block. Zero means "KIND NAMESPACE/NAME already exists and is not
	// managed by PARENTKIND NAMESPACE/NAME: CAUSE".
	Note func(Conflict) string
}

// withDefaults returns o with its zero fields set to the defaults their
// documentation states, for parents of kind parentKind.
func (o Options) withDefaults(parentKind string) Options {
	if o.FieldManager == "" {
		o.FieldManager = "converge-" + strings.ToLower(parentKind)
	}
	if o.Finalizer == "" {
		o.Finalizer = "converge.dev/" + finalizerName(o.FieldManager)
	}
	if o.Conflict.Reason == "" {
		o.Conflict.Reason = ChildConflictReason
	}
	if o.Conflict.Note == nil {
		o.Conflict.Note = defaultConflictNote
	}
	return o
}

// finalizerName makes s the name part of a qualified name: at most 63
// letters, digits, '-', '_' or '.' (others become '_'), starting and
// ending with a letter or a digit.
func finalizerName(s string) string {
	out := strings.Trim(labelValue(s), "-_.")
	if out == "" {
		return "converge"
	}
	return out
}

// conflictReason is what Options.Conflict.Reason may be: an Event reason
// that is also a valid condition reason.
var conflictReason = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)

// validate checks o, with its defaults set, against scheme: one error per
// broken rule. It has no side effects.
func (o Options) validate(scheme *runtime.Scheme) error {
	var errs []error
	if len(o.ChildKinds) == 0 {
		errs = append(errs, errors.New("declarative: Options.ChildKinds is empty; list an example object of every child kind"))
	}
	if len(o.FieldManager) > 128 {
		errs = append(errs, fmt.Errorf("declarative: Options.FieldManager %q is longer than 128 characters", o.FieldManager))
	}
	if !conflictReason.MatchString(o.Conflict.Reason) || len(o.Conflict.Reason) > 128 {
		errs = append(errs, fmt.Errorf("declarative: Options.Conflict.Reason %q must be UpperCamelCase letters and digits, at most 128 characters, like ErrResourceExists", o.Conflict.Reason))
	}
	if bad := validation.IsQualifiedName(o.Finalizer); len(bad) > 0 || !strings.Contains(o.Finalizer, "/") {
		why := "it has no domain"
		if len(bad) > 0 {
			why = strings.Join(bad, "; ")
		}
		errs = append(errs, fmt.Errorf("declarative: Options.Finalizer %q is not a valid finalizer name (%s): use a domain-qualified name, like example.com/cleanup", o.Finalizer, why))
	}
	listed := map[schema.GroupKind]bool{}
	for _, ex := range o.ChildKinds {
		if typednil.Is(ex) {
			errs = append(errs, errors.New("declarative: Options.ChildKinds holds a nil object"))
			continue
		}
		gvk, err := childGVK(scheme, ex)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		listed[gvk.GroupKind()] = true
	}
	for _, ex := range o.RequiredKinds {
		if typednil.Is(ex) {
			errs = append(errs, errors.New("declarative: Options.RequiredKinds holds a nil object"))
			continue
		}
		gvk, err := childGVK(scheme, ex)
		switch {
		case err != nil:
			errs = append(errs, err)
		case !listed[gvk.GroupKind()]:
			errs = append(errs, fmt.Errorf("declarative: Options.RequiredKinds holds kind %v, which Options.ChildKinds does not list", gvk.GroupKind()))
		}
	}
	return errors.Join(errs...)
}
