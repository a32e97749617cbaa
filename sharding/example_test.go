package sharding_test

import (
	"fmt"

	"github.com/converge-dev/converge/sharding"
)

// Buckets cut the hash space of a shard field into equal ranges: the unit a
// sharding ring hands from one replica to another. Of says which bucket a
// namespace (or UID) falls into, and Selector is the bucket's shard
// selector (KEP-5866), which an informer of the bucket lists and watches
// with.
func ExampleBuckets() {
	b := sharding.Buckets{By: sharding.ByNamespace, Count: 4}
	for _, ns := range []string{"shop", "billing", "team-0", "team-1"} {
		fmt.Println(ns, "is in bucket", b.Of(ns))
	}
	fmt.Println(b.Selector(1))
	fmt.Println(sharding.Buckets{By: "object.metadata.name", Count: 4}.Validate())
	// Output:
	// shop is in bucket 1
	// billing is in bucket 1
	// team-0 is in bucket 3
	// team-1 is in bucket 3
	// shardRange(object.metadata.namespace, '0x4000000000000000', '0x8000000000000000')
	// sharding: Buckets.By "object.metadata.name" is not "object.metadata.uid" or "object.metadata.namespace"
}
