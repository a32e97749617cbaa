package sharding

import (
	"context"
	"errors"
)

// ErrBucketNotHeld is wrapped by the errors of writes a sharded
// controller's reconcile makes after this process gave up, lost, or failed
// to renew the key's bucket: another member may reconcile the key now.
var ErrBucketNotHeld = errors.New("sharding: this process no longer holds the object's bucket; its client no longer writes for it")

// ErrClusterNotHeld is wrapped by the errors of writes through the client
// of a cluster spread over the ring (Options.Clusters) once this process
// gave up, lost, or failed to renew the cluster's Lease: another member
// may engage the cluster now.
var ErrClusterNotHeld = errors.New("sharding: this process no longer holds the cluster; its client no longer writes")

// bucketKey is the context key of a sharded reconcile's bucket.
type bucketKey struct{}

// reconciledBucket is what BucketFrom returns.
type reconciledBucket struct {
	b  int
	of Buckets
}

// WithBucket returns a copy of ctx that BucketFrom reads bucket and of
// from. The framework calls it for each reconcile of a sharded controller.
func WithBucket(ctx context.Context, bucket int, of Buckets) context.Context {
	return context.WithValue(ctx, bucketKey{}, reconciledBucket{bucket, of})
}

// BucketFrom returns the bucket of the sharding ring that holds the object
// being reconciled, and how the ring cuts objects into buckets, when ctx
// is the context of a reconcile of a sharded controller
// (framework.ControllerOptions.Sharded); ok is false otherwise. Only the
// member that holds that bucket runs the reconcile, and its writes are
// fenced by it (ErrBucketNotHeld).
func BucketFrom(ctx context.Context) (bucket int, of Buckets, ok bool) {
	rb, ok := ctx.Value(bucketKey{}).(reconciledBucket)
	return rb.b, rb.of, ok
}
