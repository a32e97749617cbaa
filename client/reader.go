package client

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/object"
)

// Reader reads objects of any kind the scheme knows into the value the
// caller passes: Get fills obj, List fills list. Client reads its cache this
// way, APIReader the API server, and informers.Cache is one too. It is the
// untyped shape; informers.Reader[T] reads one kind and returns T.
type Reader interface {
	// Get copies the object key into obj.
	Get(ctx context.Context, key types.NamespacedName, obj object.Object) error
	// List copies the objects opts select into list (a *FooList).
	List(ctx context.Context, list runtime.Object, opts ...informers.ListOption) error
}

var (
	_ Reader = (*Client)(nil)
	_ Reader = (*APIReader)(nil)
	_ Reader = (*informers.Cache)(nil)
)
