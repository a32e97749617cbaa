package declarative

import (
	"context"
	"fmt"
	"maps"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/object"
)

// unshown remembers, per parent, the entries this process wrote to one of
// the parent's annotations that list entries (LedgerAnnotation,
// RanAnnotation) which the cache's copy of the parent may not show yet, and
// lays them over what it shows. It is safe for concurrent use.
type unshown struct {
	mu sync.Mutex
	// byParent maps a parent's UID to the entries written: key to value,
	// "" for an entry removed. mu guards it.
	byParent map[types.UID]map[string]string
}

// over returns shown, the entries parent's annotation shows, with the
// writes it does not show yet laid over them. Writes it shows are
// forgotten.
func (u *unshown) over(parent types.UID, shown map[string]string) map[string]string {
	u.mu.Lock()
	defer u.mu.Unlock()
	for k, v := range u.byParent[parent] {
		if shown[k] == v {
			delete(u.byParent[parent], k) // the annotation shows it
			continue
		}
		if v == "" {
			delete(shown, k)
		} else {
			shown[k] = v
		}
	}
	return shown
}

// note remembers that parent's annotation gets changes.
func (u *unshown) note(parent types.UID, changes map[string]string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.byParent == nil {
		u.byParent = map[types.UID]map[string]string{}
	}
	if u.byParent[parent] == nil {
		u.byParent[parent] = map[string]string{}
	}
	maps.Copy(u.byParent[parent], changes)
}

// forget drops what is remembered of parent, which is gone.
func (u *unshown) forget(parent types.UID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.byParent, parent)
}

// writeAnnotation writes annotation on parent, with field manager manager,
// to what value returns for the parent as the API server holds it ("" to
// remove it): it reads the parent from the API server, and writes the
// annotation back on condition that the parent is unchanged (its UID and
// resourceVersion), again on a conflict, so that a write never drops
// another's. A parent gone (deleted, or replaced by another of its name)
// is not an error. what says what is written, for errors.
func (d *Declarative[T]) writeAnnotation(ctx context.Context, parent object.Object, what, annotation, manager string, value func(fresh metav1.Object) string) error {
	what = fmt.Sprintf("record %s of %s %s in annotation %s", what, d.parentGVK.Kind, key(parent.GetNamespace(), parent.GetName()), annotation)
	for attempt := 0; ; attempt++ {
		fresh, err := d.readMeta(ctx, d.parentGVK, parent.GetNamespace(), parent.GetName())
		if apierrors.IsNotFound(err) || (err == nil && fresh.GetUID() != parent.GetUID()) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		u := d.objectRef(parent)
		u.SetUID(parent.GetUID())
		u.SetResourceVersion(fresh.GetResourceVersion())
		if v := value(fresh); v != "" {
			u.SetAnnotations(map[string]string{annotation: v})
		}
		_, err = d.client.Apply(ctx, u, client.FieldManager(manager), client.ForceOwnership())
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err) && attempt < 5:
			continue // written meanwhile (or replaced: the next read tells)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
}
