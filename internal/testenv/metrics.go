package testenv

import (
	"io"
	"net/http"
	"testing"

	"github.com/converge-dev/converge/framework"
)

// MetricsGet fetches path (with its query) from the server of mgr's
// metrics and debug endpoint, and returns the answer's status and body.
func MetricsGet(t *testing.T, mgr *framework.Manager, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+mgr.MetricsAddress()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}
