package informers

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// transform returns the function applied to each object e's informer
// stores: managedFields stripped unless kept, then the user's Transform,
// then, for a compact kind, the object's record made (see compactCodec),
// else equal values shared with other cached objects unless sharing is
// disabled; last, every sampleEvery-th object is measured (see
// sizeSampler). A record passes as it is: client-go may transform an
// object twice. An object of another type than the kind's (a Transform
// breaking its rule) is stored as it is, so that reads report it (see as).
func (c *Cache) transform(e *entry) cache.TransformFunc {
	user, strip, share := c.opts.Transform, !c.opts.KeepManagedFields, c.share
	return func(obj any) (any, error) {
		if _, ok := obj.(*compactObject); ok {
			return obj, nil
		}
		if m, ok := obj.(metav1.Object); strip && ok && m.GetManagedFields() != nil {
			m.SetManagedFields(nil)
		}
		if user != nil {
			var err error
			if obj, err = user(obj); err != nil {
				return nil, err
			}
		}
		if e.compact != nil && e.compact.fits(obj) {
			r, decoded, err := e.compact.encode(obj)
			if err != nil {
				return nil, fmt.Errorf("informers: %s: store %s compact: %w", e.desc, cache.MetaObjectToName(obj.(metav1.Object)), err)
			}
			if d := e.compact.decoded; d != nil && decoded != nil {
				// The event's listeners, and the reconcile it causes,
				// read the object just decoded.
				d.put(r, decoded)
			}
			e.size.observe(r, nil)
			return r, nil
		}
		if share != nil {
			share.object(obj)
		}
		e.size.observe(obj, share)
		return obj, nil
	}
}
