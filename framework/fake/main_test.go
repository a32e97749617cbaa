package fake_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives the tests: every
// watch and request the server handles ends with its client or with Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
