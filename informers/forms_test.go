package informers_test

import (
	"testing"

	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/testenv"
)

// inBothForms runs test decoded and compact (testenv.InBothForms): under
// "compact", started makes every kind compact (see compactOptions).
func inBothForms(t *testing.T, test func(t *testing.T)) { testenv.InBothForms(t, test) }

// compactForm reports whether t runs under inBothForms's "compact".
func compactForm(t *testing.T) bool { return testenv.Compact(t) }

// compactOptions returns opts with every kind of client-go's scheme
// compact. Few objects are kept decoded, so that reads both find them kept
// and decode them.
func compactOptions(opts informers.Options) informers.Options {
	opts.Compact = testenv.CompactKinds(clientgoscheme.Scheme, informers.CompactOptions{Decoded: 4})
	return opts
}
