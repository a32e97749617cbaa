package webhook

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-dev/converge/object"
)

// Warnings are messages returned to the client alongside an admission
// decision (kubectl prints each one as "Warning: ..."). The API server keeps
// at most 4096 characters of warnings per response; keep them short.
type Warnings []string

// Defaulter sets defaults on obj in place. obj is the handler's own decoded
// copy of the request's object; converge answers the API server with the
// JSON patch from the request's object to obj after Default returns. An
// error denies the request with the error's text (a typed nil error counts
// as nil). ctx ends by the API server's deadline for the request.
type Defaulter[T object.Object] interface {
	Default(ctx context.Context, obj T) error
}

// DefaulterFunc adapts a function to a Defaulter.
type DefaulterFunc[T object.Object] func(ctx context.Context, obj T) error

var _ Defaulter[object.Object] = DefaulterFunc[object.Object](nil)

// Default calls f(ctx, obj).
func (f DefaulterFunc[T]) Default(ctx context.Context, obj T) error { return f(ctx, obj) }

// Validator admits or denies creates, updates and deletes of T. A non-nil
// error denies the request: its text becomes the denial's message, and an
// apierrors.APIStatus (such as apierrors.NewInvalid) keeps its code, reason
// and details. Warnings reach the client whether the request is allowed or
// denied. The objects are the handler's own decoded copies. A typed nil
// error counts as nil. ctx ends by the API server's deadline for the
// request; return by then, or the request is denied without the answer.
//
// ValidateUpdate also sees the updates that remove finalizers from an object
// being deleted (newObj's DeletionTimestamp is set): denying those keeps the
// object Terminating until the rule passes, so a rule about the spec should
// usually let them through.
type Validator[T object.Object] interface {
	// ValidateCreate checks a new object.
	ValidateCreate(ctx context.Context, obj T) (Warnings, error)
	// ValidateUpdate checks a change from oldObj to newObj.
	ValidateUpdate(ctx context.Context, oldObj, newObj T) (Warnings, error)
	// ValidateDelete checks the deletion of obj (the object as stored; the
	// webhook configuration must list the DELETE operation for it to be called).
	ValidateDelete(ctx context.Context, obj T) (Warnings, error)
}

// ValidatorFuncs adapts up to three functions to a Validator; a nil field
// allows that operation with no warnings.
type ValidatorFuncs[T object.Object] struct {
	Create func(ctx context.Context, obj T) (Warnings, error)
	Update func(ctx context.Context, oldObj, newObj T) (Warnings, error)
	Delete func(ctx context.Context, obj T) (Warnings, error)
}

var _ Validator[object.Object] = ValidatorFuncs[object.Object]{}

// ValidateCreate calls v.Create, or allows when it is nil.
func (v ValidatorFuncs[T]) ValidateCreate(ctx context.Context, obj T) (Warnings, error) {
	if v.Create == nil {
		return nil, nil
	}
	return v.Create(ctx, obj)
}

// ValidateUpdate calls v.Update, or allows when it is nil.
func (v ValidatorFuncs[T]) ValidateUpdate(ctx context.Context, oldObj, newObj T) (Warnings, error) {
	if v.Update == nil {
		return nil, nil
	}
	return v.Update(ctx, oldObj, newObj)
}

// ValidateDelete calls v.Delete, or allows when it is nil.
func (v ValidatorFuncs[T]) ValidateDelete(ctx context.Context, obj T) (Warnings, error) {
	if v.Delete == nil {
		return nil, nil
	}
	return v.Delete(ctx, obj)
}

// Hub marks the one version of a kind that every other version converts
// through (usually the storage version). Hub's method does nothing; it only
// marks the type.
type Hub interface {
	object.Object
	Hub()
}

// Convertible is a version of a kind other than its hub (a spoke): it
// converts itself to the hub and fills itself from the hub. ConvertTo fills
// hub (a fresh, empty object of the hub's type) from the receiver;
// ConvertFrom fills the receiver (fresh and empty) from hub. Metadata need
// not be copied: the handler keeps the object's metadata as it was, taking
// only the labels and annotations of the converted object when it has any
// (the API server refuses a conversion that changes other metadata). Fields
// that one version lacks survive a round trip only if the conversion stores
// them, for example in an annotation.
type Convertible interface {
	object.Object
	ConvertTo(hub Hub) error
	ConvertFrom(hub Hub) error
}

// ConvertPath is the path conversion webhooks are served on.
const ConvertPath = "/convert"

// MutatePath returns the path of gvk's mutating webhook, kubebuilder's
// "/mutate-<group with dots as dashes>-<version>-<lowercase kind>"; the
// core group gives "/mutate--v1-pod".
func MutatePath(gvk schema.GroupVersionKind) string { return admissionPath("mutate", gvk) }

// ValidatePath returns the path of gvk's validating webhook,
// "/validate-<group with dots as dashes>-<version>-<lowercase kind>"; the
// core group gives "/validate--v1-pod".
func ValidatePath(gvk schema.GroupVersionKind) string { return admissionPath("validate", gvk) }

func admissionPath(verb string, gvk schema.GroupVersionKind) string {
	return "/" + verb + "-" + strings.ReplaceAll(gvk.Group, ".", "-") + "-" + gvk.Version + "-" + strings.ToLower(gvk.Kind)
}
