package informers

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/internal/hooks"
	"github.com/converge-dev/converge/object"
	"github.com/converge-dev/converge/sharding"
)

// The functions of this package that framework and declarative call through
// internal/hooks, and the methods of generic types behind them.
func init() {
	hooks.SetInformers(
		func(inf any, key types.NamespacedName) (object.Object, bool) {
			return inf.(interface {
				peekObject(types.NamespacedName) (object.Object, bool)
			}).peekObject(key)
		},
		func(witness any, kind schema.GroupVersionKind, b sharding.Buckets, held any) (any, error) {
			return witness.(interface {
				newBucketReader(schema.GroupVersionKind, sharding.Buckets, any) (any, error)
			}).newBucketReader(kind, b, held)
		},
		func(c any, example object.Object, sel any, b sharding.Buckets, held func() []int) error {
			return c.(*Cache).routeReads(example, sel.(Selection), b, held)
		},
		func(r any) (sharding.Buckets, bool) {
			return r.(interface {
				routed() (sharding.Buckets, bool)
			}).routed()
		},
	)
}

// peekObject is peek, for hooks.Peek.
func (i *Informer[T]) peekObject(key types.NamespacedName) (object.Object, bool) {
	return i.peek(key)
}

// newBucketReader is newBucketReader of T, for hooks.NewBucketReader: i
// (nil as a rule) names T, and held is a func() map[int]*Informer[T].
func (i *Informer[T]) newBucketReader(kind schema.GroupVersionKind, b sharding.Buckets, held any) (any, error) {
	h, ok := held.(func() map[int]*Informer[T])
	if !ok {
		return nil, fmt.Errorf("informers: bucket reader of %s: held is a %T, not a func() map[int]*Informer[%T]", describe(kind), held, *new(T))
	}
	r, err := newBucketReader(kind, b, h)
	if err != nil {
		return nil, err
	}
	return r, nil
}
