package explore

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/object"
)

// Step is one step of a scenario: what a user (or another actor, such as
// a built-in controller the fake does not run) does to the cluster.
type Step struct {
	// Name says what the step does, in failure reports.
	Name string
	// Do acts on the cluster through c, a client of the scenario's own
	// identity (never faulted); its reads come from a cache of that
	// identity. An error fails the schedule, except while the controllers
	// lag behind the step before (see Lag): then they catch up first and Do
	// is called again, so a step that fails with no effect when what it
	// needs is not there yet (a child the controllers create) still runs.
	Do func(ctx context.Context, c *client.Client) error

	// obj is the object of a Create, Update or Delete step, checked by
	// Options validation (a typed nil is refused there).
	obj object.Object
}

// Create is a Step that creates obj (a copy of it, so the step can run in
// every schedule).
func Create(obj object.Object) Step {
	return Step{Name: "create " + describe(obj), obj: obj, Do: func(ctx context.Context, c *client.Client) error {
		return c.Create(ctx, obj.DeepCopyObject().(object.Object))
	}}
}

// Update is a Step that reads the object named key, applies mutate to it
// and updates it, reading again after a conflict.
func Update[T object.Object](key types.NamespacedName, mutate func(T)) Step {
	return Step{Name: fmt.Sprintf("update %T %s", *new(T), key), Do: func(ctx context.Context, c *client.Client) error {
		for {
			obj := newObject[T]()
			if err := c.Get(ctx, key, obj); err != nil {
				return err
			}
			mutate(obj)
			err := c.Update(ctx, obj)
			if !apierrors.IsConflict(err) {
				return err
			}
			if ctx.Err() != nil {
				return err
			}
		}
	}}
}

// Delete is a Step that deletes the object obj names (its kind,
// namespace and name).
func Delete(obj object.Object) Step {
	return Step{Name: "delete " + describe(obj), obj: obj, Do: func(ctx context.Context, c *client.Client) error {
		return c.Delete(ctx, obj.DeepCopyObject().(object.Object))
	}}
}

func describe(obj object.Object) string {
	if typednil.Is(obj) {
		return fmt.Sprintf("%T <nil>", obj)
	}
	name := obj.GetName()
	if ns := obj.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return fmt.Sprintf("%T %s", obj, name)
}
