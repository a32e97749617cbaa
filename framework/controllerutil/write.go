package controllerutil

import (
	"context"
	"encoding/json"
	"fmt"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/object"
)

// OperationResult says what CreateOrUpdate or CreateOrPatch did.
type OperationResult string

const (
	// Unchanged: the object existed and mutate changed nothing; nothing was written.
	Unchanged OperationResult = "unchanged"
	// Created: the object did not exist and was created.
	Created OperationResult = "created"
	// Updated: the object existed and was replaced (CreateOrUpdate).
	Updated OperationResult = "updated"
	// Patched: the object existed and was patched (CreateOrPatch), status
	// included when mutate changed it.
	Patched OperationResult = "patched"
)

// MutateFunc sets the fields the caller wants on the object it is given,
// which holds the object as it exists (or only its name and namespace when
// it does not exist yet). It must not change the name or namespace.
type MutateFunc func() error

// Client is what CreateOrUpdate and CreateOrPatch read and write through:
// client.Reader's Get, the writes, and the status subresource. *client.Client
// implements it; a wrapper around one (recording or refusing writes, say)
// can too.
type Client interface {
	client.Reader
	Create(ctx context.Context, obj object.Object, opts ...client.WriteOption) error
	Update(ctx context.Context, obj object.Object, opts ...client.WriteOption) error
	Patch(ctx context.Context, obj object.Object, pt types.PatchType, data []byte, opts ...client.WriteOption) error
	Status() client.StatusWriter
}

var _ Client = (*client.Client)(nil)

// CreateOrUpdate reads obj (by its namespace and name) through c, calls
// mutate, and creates obj if it did not exist, updates it if mutate changed
// it, or writes nothing. The update carries the resourceVersion read, so a
// concurrent change makes it fail with a conflict (retry the reconcile).
// It fails, writing nothing, when c, obj or mutate is nil.
func CreateOrUpdate(ctx context.Context, c Client, obj object.Object, mutate MutateFunc) (OperationResult, error) {
	existing, err := readForWrite(ctx, c, obj, mutate)
	if err != nil || existing == nil {
		return created(err)
	}
	if equality.Semantic.DeepEqual(existing, obj) {
		return Unchanged, nil
	}
	if err := c.Update(ctx, obj); err != nil {
		return Unchanged, err
	}
	return Updated, nil
}

// CreateOrPatch is CreateOrUpdate with JSON merge patches instead of an
// update: only the fields mutate changed are sent, so fields this program's
// Go types do not know survive. A status that mutate changed is patched
// through the status subresource, or with the rest of the object when the
// kind has none.
func CreateOrPatch(ctx context.Context, c Client, obj object.Object, mutate MutateFunc) (OperationResult, error) {
	existing, err := readForWrite(ctx, c, obj, mutate)
	if err != nil || existing == nil {
		return created(err)
	}
	patch, err := mergePatchMap(existing, obj)
	if err != nil {
		return Unchanged, fmt.Errorf("patch %s: %w", describe(obj), err)
	}
	status, hasStatus := patch["status"]
	delete(patch, "status")
	if len(patch) == 0 && !hasStatus {
		return Unchanged, nil
	}
	if hasStatus {
		data, err := json.Marshal(map[string]any{"status": status})
		if err != nil {
			return Unchanged, err
		}
		switch err := c.Status().Patch(ctx, obj, types.MergePatchType, data); {
		case apierrors.IsNotFound(err):
			// The object was just read, so the kind has no status
			// subresource (a custom resource whose status is a plain
			// field): the status goes with the rest. Were the object gone
			// instead, that patch fails with NotFound in turn.
			patch["status"] = status
		case err != nil:
			return Unchanged, err
		}
	}
	if len(patch) > 0 {
		data, err := json.Marshal(patch)
		if err != nil {
			return Unchanged, err
		}
		if err := c.Patch(ctx, obj, types.MergePatchType, data); err != nil {
			return Unchanged, err
		}
	}
	return Patched, nil
}

// readForWrite reads obj's current state into obj and runs mutate. It
// returns a copy of the state read, or nil when obj did not exist, in which
// case it has created obj. No argument may be nil.
func readForWrite(ctx context.Context, c Client, obj object.Object, mutate MutateFunc) (object.Object, error) {
	if err := typednil.Check("obj", obj); err != nil {
		return nil, err
	}
	for _, arg := range []struct {
		name string
		v    any
	}{{"c", c}, {"mutate", mutate}} {
		if err := typednil.Check(arg.name, arg.v); err != nil {
			return nil, fmt.Errorf("%s: %w", describe(obj), err)
		}
	}
	ns, name := obj.GetNamespace(), obj.GetName()
	err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		if err := runMutate(mutate, obj, ns, name); err != nil {
			return nil, err
		}
		return nil, c.Create(ctx, obj)
	case err != nil:
		return nil, err
	}
	existing := obj.DeepCopyObject().(object.Object)
	if err := runMutate(mutate, obj, ns, name); err != nil {
		return nil, err
	}
	return existing, nil
}

func runMutate(mutate MutateFunc, obj object.Object, ns, name string) error {
	if err := mutate(); err != nil {
		return fmt.Errorf("mutate %s: %w", describe(obj), err)
	}
	if obj.GetNamespace() != ns || obj.GetName() != name {
		return fmt.Errorf("mutate %s/%s: it changed the object's name or namespace to %s", ns, name, describe(obj))
	}
	return nil
}

// created is the outcome of readForWrite when it found nothing to compare:
// it created the object, or failed.
func created(err error) (OperationResult, error) {
	if err != nil {
		return Unchanged, err
	}
	return Created, nil
}

// MergePatch returns the JSON merge patch (RFC 7386) that turns original
// into modified, for Client.Patch with types.MergePatchType. With
// optimisticLock, the patch carries original's resourceVersion, so the API
// server refuses it (with a conflict) if the object changed meanwhile.
// Lists are replaced whole, as merge patches do.
func MergePatch(original, modified object.Object, optimisticLock bool) ([]byte, error) {
	for _, arg := range []struct {
		name string
		v    object.Object
	}{{"original", original}, {"modified", modified}} {
		if err := typednil.Check(arg.name, arg.v); err != nil {
			return nil, fmt.Errorf("merge patch: %w", err)
		}
	}
	patch, err := mergePatchMap(original, modified)
	if err != nil {
		return nil, fmt.Errorf("merge patch of %s: %w", describe(modified), err)
	}
	if optimisticLock {
		md, _ := patch["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			patch["metadata"] = md
		}
		md["resourceVersion"] = original.GetResourceVersion()
	}
	return json.Marshal(patch)
}

func mergePatchMap(original, modified any) (map[string]any, error) {
	a, err := json.Marshal(original)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(modified)
	if err != nil {
		return nil, err
	}
	data, err := jsonpatch.CreateMergePatch(a, b)
	if err != nil {
		return nil, err
	}
	var patch map[string]any
	if err := json.Unmarshal(data, &patch); err != nil {
		return nil, err
	}
	return patch, nil
}
