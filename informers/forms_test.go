package informers_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/converge-dev/converge/informers"
)

// inBothForms runs test twice, as subtests: "decoded", with the options
// the test gives, and "compact", where started adds Options.Compact for
// every kind (see compactOptions). The suites of the cache's readers run
// this way, so that each reader is shown to work unchanged on compact
// kinds.
func inBothForms(t *testing.T, test func(t *testing.T)) {
	t.Run("decoded", test)
	t.Run("compact", test)
}

// compactForm reports whether t runs under inBothForms's "compact".
func compactForm(t *testing.T) bool {
	return strings.Contains(t.Name(), "/compact")
}

// compactOptions returns opts with every kind of client-go's scheme, and
// the test's custom resources, compact. Few objects are kept decoded, so
// that reads both find them kept and decode them, and small bodies are
// compressed or not depending on their size.
func compactOptions(opts informers.Options) informers.Options {
	opts.Compact = map[schema.GroupKind]informers.CompactOptions{}
	for gvk := range clientgoscheme.Scheme.AllKnownTypes() {
		opts.Compact[gvk.GroupKind()] = informers.CompactOptions{Decoded: 4}
	}
	return opts
}
