package informers

import "k8s.io/apimachinery/pkg/runtime/schema"

// DropCompactLabels makes the records of kind gk that c stores from now on
// lose their objects' labels (see compactCodec.dropLabels); gk must have
// an informer.
func DropCompactLabels(c *Cache, gk schema.GroupKind) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, cc := range c.codecs {
		if k.gvk.GroupKind() == gk {
			cc.dropLabels = true
		}
	}
}

// CountsAlone reports whether the informers of c that hold objects of kind
// gk count them with a handler of their own (see counts), one answer per
// informer.
func CountsAlone(c *Cache, gk schema.GroupKind) []bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	var alone []bool
	for k, e := range c.entries {
		if k.gvk.GroupKind() == gk {
			e.counts.mu.Lock()
			alone = append(alone, e.counts.alone != nil)
			e.counts.mu.Unlock()
		}
	}
	return alone
}
