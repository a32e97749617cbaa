package testenv

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-dev/converge/informers"
)

// InBothForms runs test twice, as subtests: "decoded", and "compact",
// where the cache a test builds (see Compact) stores its kinds compact
// (informers.Options.Compact). A suite of readers runs this way to show
// that each works unchanged on compact kinds.
func InBothForms(t *testing.T, test func(t *testing.T)) {
	t.Run("decoded", test)
	t.Run("compact", test)
}

// Compact reports whether t runs under InBothForms's "compact".
func Compact(t testing.TB) bool { return strings.Contains(t.Name(), "/compact") }

// CompactKinds returns an informers.Options.Compact that names every kind
// of s, each with o.
func CompactKinds(s *runtime.Scheme, o informers.CompactOptions) map[schema.GroupKind]informers.CompactOptions {
	out := map[schema.GroupKind]informers.CompactOptions{}
	for gvk := range s.AllKnownTypes() {
		out[gvk.GroupKind()] = o
	}
	return out
}
