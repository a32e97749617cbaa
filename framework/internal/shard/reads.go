package shard

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/informers"
)

// held returns the held buckets' informers, by bucket.
func (p *Primary[T]) held() []*informers.Informer[T] {
	infs := *p.informers.Load()
	out := make([]*informers.Informer[T], 0, len(infs))
	for _, b := range slices.Sorted(maps.Keys(infs)) {
		out = append(out, infs[b])
	}
	return out
}

// heldBuckets returns the buckets whose informers exist, for the cache's
// read routing.
func (p *Primary[T]) heldBuckets() []int {
	return slices.Sorted(maps.Keys(*p.informers.Load()))
}

// Get reads the object of key from the held bucket that holds it, and
// notes it as read for the preconditions of the reconcile's writes (see
// client.WithPreconditions).
func (p *Primary[T]) Get(ctx context.Context, key types.NamespacedName) (T, error) {
	obj, err := p.shards.Get(ctx, key)
	if err == nil {
		client.NoteRead(ctx, p.kind.GroupKind(), obj)
	}
	return obj, err
}

// List lists the objects of every held bucket.
func (p *Primary[T]) List(ctx context.Context, opts ...informers.ListOption) ([]T, error) {
	return p.shards.List(ctx, opts...)
}

// String, Contains, HasSynced, Relists, Health and Len are what the debug
// pages read of the primary informer.
func (p *Primary[T]) String() string {
	return fmt.Sprintf("%s in buckets %v of ring %s", p.src.String(), p.heldBuckets(), p.ring.Options().Ring)
}

func (p *Primary[T]) Contains(key types.NamespacedName) bool {
	for _, inf := range p.held() {
		if inf.Contains(key) {
			return true
		}
	}
	return false
}

func (p *Primary[T]) HasSynced() bool {
	for _, inf := range p.held() {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

func (p *Primary[T]) Relists() int64 {
	var n int64
	for _, inf := range p.held() {
		n += inf.Relists()
	}
	return n
}

func (p *Primary[T]) Len() int {
	n := 0
	for _, inf := range p.held() {
		n += inf.Len()
	}
	return n
}

// Stats describes the held buckets' informers as one: their objects,
// bytes and relists summed, synced and watching when all are, their
// errors joined.
func (p *Primary[T]) Stats() informers.InformerStats {
	out := informers.InformerStats{Description: p.String(), Synced: true, Watching: true}
	var errs []error
	for _, inf := range p.held() {
		st := inf.Stats()
		out.Kind, out.Mode = st.Kind, st.Mode
		out.Objects += st.Objects
		out.Bytes += st.Bytes
		out.Relists += st.Relists
		out.Synced = out.Synced && st.Synced
		out.Watching = out.Watching && st.Watching
		out.StartedByRead = out.StartedByRead || st.StartedByRead
		errs = append(errs, st.Err)
	}
	out.Err = errors.Join(errs...)
	return out
}

func (p *Primary[T]) Health() error {
	var errs []error
	for _, inf := range p.held() {
		errs = append(errs, inf.Health())
	}
	return errors.Join(errs...)
}
