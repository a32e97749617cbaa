// Package shard is the primary source of a sharded controller: the
// informers of the buckets this member of the ring holds, read per bucket
// (with, when the ring shards by namespace, the controller's sources whose
// requests stay in each object's namespace), the marks a bucket's next
// holder starts from, and the Gate its workers ask before dispatching a
// key. The ring (framework/internal/ring) drives a Primary as its User;
// the framework binds its sources through Source and Config, and only the
// framework package uses it.
package shard
