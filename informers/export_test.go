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
