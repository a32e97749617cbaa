package informers

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// transform returns the function applied to each object before it is stored:
// managedFields stripped unless kept, then the user's Transform.
func (c *Cache) transform() cache.TransformFunc {
	user := c.opts.Transform
	if c.opts.KeepManagedFields {
		return user
	}
	return func(obj any) (any, error) {
		if m, ok := obj.(metav1.Object); ok && m.GetManagedFields() != nil {
			m.SetManagedFields(nil)
		}
		if user != nil {
			return user(obj)
		}
		return obj, nil
	}
}
