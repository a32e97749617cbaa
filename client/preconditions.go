package client

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/converge-dev/converge/object"
)

// preconditionsKey is the context key of WithPreconditions' record.
type preconditionsKey struct{}

// versions records the version of each object read or written under one
// context. It is safe for concurrent use: a reconcile may write from
// several goroutines.
type versions struct {
	mu sync.Mutex
	// of holds each object's UID and resourceVersion; mu guards it.
	of map[objectKey]version
}

type objectKey struct {
	gk              schema.GroupKind
	namespace, name string
}

type version struct {
	uid types.UID
	rv  string
}

// WithPreconditions returns a copy of ctx under which every Client write
// of an object read under ctx (by a Client's or APIReader's Get or List,
// or noted with NoteRead) carries a precondition the API server checks:
// the object's resourceVersion as last read or written under ctx, and, for
// a deletion, its UID too. A write that arrives after anyone else changed
// the object (or deleted and re-created it) is then refused with a
// Conflict, however late it arrives. The precondition goes where each
// write form has one: the object's resourceVersion for an update, the
// patch's metadata.resourceVersion for a merge, strategic merge or
// server-side apply patch (a JSON patch gets an operation setting it), and
// DeleteOptions.Preconditions for a deletion; the status subresource alike.
// A write that names a resourceVersion itself keeps it; a conflict on a
// precondition added here names the version it expected.
//
// Writes of objects not read under ctx carry none: a Create is refused
// only when the object exists (AlreadyExists), and a server-side apply of
// an object never read creates or updates it unconditionally. Neither does
// DeleteAllOf, or a CBOR apply patch.
//
// The framework puts one in the context of every reconcile of a sharded
// controller (sharding.Options), with the object being reconciled
// noted.
func WithPreconditions(ctx context.Context) context.Context {
	return context.WithValue(ctx, preconditionsKey{}, &versions{of: map[objectKey]version{}})
}

func versionsFrom(ctx context.Context) *versions {
	v, _ := ctx.Value(preconditionsKey{}).(*versions)
	return v
}

// NoteRead records objs, objects of kind read under ctx other than through
// a Client or APIReader (an informers.Reader, a metadata client), as read
// at their resourceVersions, for the preconditions of later writes (see
// WithPreconditions). It does nothing when ctx carries no
// WithPreconditions.
func NoteRead(ctx context.Context, kind schema.GroupKind, objs ...metav1.Object) {
	vs := versionsFrom(ctx)
	if vs == nil {
		return
	}
	for _, obj := range objs {
		vs.read(objectKey{gk: kind, namespace: obj.GetNamespace(), name: obj.GetName()}, obj)
	}
}

// noteRead records obj, read under ctx, as NoteRead does; its kind is
// KindOf's.
func noteRead(ctx context.Context, scheme *runtime.Scheme, obj object.Object) {
	if vs := versionsFrom(ctx); vs != nil {
		if k, ok := keyOf(scheme, obj); ok {
			vs.read(k, obj)
		}
	}
}

// noteList records the items of list, read under ctx, as noteRead does.
func noteList(ctx context.Context, scheme *runtime.Scheme, list runtime.Object) {
	if versionsFrom(ctx) == nil {
		return
	}
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		if obj, ok := o.(object.Object); ok {
			noteRead(ctx, scheme, obj)
		}
		return nil
	})
}

// read records obj, the object of k, as read. A read older than what was
// recorded of the same object (a cache behind this context's own write)
// does not replace it.
func (vs *versions) read(k objectKey, obj metav1.Object) {
	if obj.GetResourceVersion() == "" {
		return
	}
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if old, ok := vs.of[k]; ok && old.uid == obj.GetUID() && older(obj.GetResourceVersion(), old.rv) {
		return
	}
	vs.of[k] = version{uid: obj.GetUID(), rv: obj.GetResourceVersion()}
}

// wrote records obj as the server answered a write of it.
func (vs *versions) wrote(k objectKey, obj metav1.Object) {
	if obj.GetResourceVersion() == "" {
		return
	}
	vs.mu.Lock()
	defer vs.mu.Unlock()
	vs.of[k] = version{uid: obj.GetUID(), rv: obj.GetResourceVersion()}
}

// forget drops what was recorded of the object of k, deleted.
func (vs *versions) forget(k objectKey) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	delete(vs.of, k)
}

func (vs *versions) get(k objectKey) (version, bool) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	v, ok := vs.of[k]
	return v, ok
}

// older reports whether resourceVersion a is older than b, when both are
// decimal integers (as etcd's are); otherwise it cannot tell and says no.
func older(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x < y
}

func keyOf(scheme *runtime.Scheme, obj object.Object) (objectKey, bool) {
	gvk, err := KindOf(scheme, obj)
	if err != nil {
		return objectKey{}, false
	}
	return objectKey{gk: gvk.GroupKind(), namespace: obj.GetNamespace(), name: obj.GetName()}, true
}

// precondition is what a write of the object of k under ctx is
// conditional on; ok is false when ctx carries no WithPreconditions or the
// object was not read under it.
func precondition(ctx context.Context, k objectKey) (version, bool) {
	vs := versionsFrom(ctx)
	if vs == nil {
		return version{}, false
	}
	return vs.get(k)
}

// withResourceVersion returns patch data of type pt that also sets the
// object's metadata.resourceVersion to rv, unless it sets one itself; ok
// is false when it cannot (a CBOR apply patch, a patch that does not
// decode).
func withResourceVersion(pt types.PatchType, data []byte, rv string) (out []byte, ok bool) {
	switch pt {
	case types.JSONPatchType:
		var ops []map[string]any
		if json.Unmarshal(data, &ops) != nil {
			return data, false
		}
		for _, op := range ops {
			if p, _ := op["path"].(string); strings.HasPrefix(p, "/metadata/resourceVersion") {
				return data, false
			}
		}
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/resourceVersion", "value": rv})
		b, err := json.Marshal(ops)
		return b, err == nil
	case types.MergePatchType, types.StrategicMergePatchType, types.ApplyPatchType:
		var body map[string]any
		if json.Unmarshal(data, &body) != nil {
			// An apply patch may be YAML.
			j, err := yaml.YAMLToJSON(data)
			if pt != types.ApplyPatchType || err != nil || json.Unmarshal(j, &body) != nil {
				return data, false
			}
		}
		if body == nil {
			return data, false
		}
		md, isMap := body["metadata"].(map[string]any)
		if _, set := body["metadata"]; set && !isMap {
			return data, false
		}
		if md == nil {
			md = map[string]any{}
			body["metadata"] = md
		}
		if _, set := md["resourceVersion"]; set {
			return data, false
		}
		md["resourceVersion"] = rv
		b, err := json.Marshal(body)
		return b, err == nil
	}
	return data, false
}
