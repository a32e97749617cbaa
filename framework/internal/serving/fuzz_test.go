package serving_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/go-logr/logr"

	"github.com/converge-dev/converge/framework/internal/serving"
)

// FuzzAuthFilter sends arbitrary Authorization headers and paths through the
// metrics authentication filter, backed by a fake API server that accepts
// only the token "good" and authorizes only /metrics: the filter never
// panics, never lets an unauthenticated request through, and answers 401,
// 403 or 200 as the reviews say.
func FuzzAuthFilter(f *testing.F) {
	f.Add("Bearer good", "/metrics")
	f.Add("Bearer bad", "/metrics")
	f.Add("Bearer good", "/other")
	f.Add("Basic Zm9vOmJhcg==", "/metrics")
	f.Add("Bearer ", "/metrics")
	f.Add("", "/")
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview)
		tr.Status.Authenticated = tr.Spec.Token == "good"
		tr.Status.User = authnv1.UserInfo{Username: "scraper"}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview)
		sar.Status.Allowed = sar.Spec.NonResourceAttributes != nil && sar.Spec.NonResourceAttributes.Path == "/metrics"
		return true, sar, nil
	})
	filter := serving.NewAuthFilter(cs, logr.Discard())
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	f.Fuzz(func(t *testing.T, header, path string) {
		req := httptest.NewRequest(http.MethodGet, "http://x/", nil)
		req.URL.Path = path
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		rec := httptest.NewRecorder()
		filter.Wrap(ok).ServeHTTP(rec, req)
		token, bearer := cutBearer(header)
		want := http.StatusUnauthorized
		switch {
		case bearer && token == "good" && path == "/metrics":
			want = http.StatusOK
		case bearer && token == "good":
			want = http.StatusForbidden
		}
		if rec.Code != want {
			t.Errorf("Authorization %q on %q: status %d, want %d", header, path, rec.Code, want)
		}
	})
}

// cutBearer is the fuzz oracle: an RFC 7235 "Bearer" credential, scheme
// case-insensitive, surrounding white space ignored.
func cutBearer(h string) (string, bool) {
	fields := strings.Fields(h)
	if len(fields) != 2 || !strings.EqualFold(fields[0], "bearer") {
		return "", false
	}
	return fields[1], true
}
