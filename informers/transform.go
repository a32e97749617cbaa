package informers

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// transform returns the function applied to each object e's informer
// stores: managedFields stripped unless kept, then the user's Transform,
// then equal values shared with other cached objects unless sharing is
// disabled; last, every sampleEvery-th object is measured (see
// sizeSampler).
func (c *Cache) transform(e *entry) cache.TransformFunc {
	user, strip, share := c.opts.Transform, !c.opts.KeepManagedFields, c.share
	return func(obj any) (any, error) {
		if m, ok := obj.(metav1.Object); strip && ok && m.GetManagedFields() != nil {
			m.SetManagedFields(nil)
		}
		if user != nil {
			var err error
			if obj, err = user(obj); err != nil {
				return nil, err
			}
		}
		if share != nil {
			share.object(obj)
		}
		e.size.observe(obj, share)
		return obj, nil
	}
}
