package serving

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// AuthFilter admits a request when its bearer token authenticates (a
// TokenReview) and its identity may "get" the request's path (a
// SubjectAccessReview on the non-resource URL), as kube-rbac-proxy and
// controller-runtime's filters do. Decisions are cached briefly per token
// digest and path; tokens themselves are never stored or logged. A review
// that cannot reach the API server answers 503 and is not cached. An
// AuthFilter is safe for concurrent use.
type AuthFilter struct {
	cs  kubernetes.Interface
	log logr.Logger

	mu sync.Mutex
	// decisions caches recent outcomes; mu guards it.
	decisions map[decisionKey]decision
}

type decisionKey struct {
	token [sha256.Size]byte
	path  string
}

type decision struct {
	status  int // http.StatusOK, StatusUnauthorized or StatusForbidden
	expires time.Time
}

const (
	decisionTTL     = 10 * time.Second
	maxDecisions    = 1024
	reviewTimeout   = 10 * time.Second
	wwwAuthenticate = `Bearer realm="converge metrics"`
)

// NewAuthFilter returns a filter that reviews tokens and access through cs
// and logs review failures to log (named "metrics-auth").
func NewAuthFilter(cs kubernetes.Interface, log logr.Logger) *AuthFilter {
	return &AuthFilter{cs: cs, log: log.WithName("metrics-auth"), decisions: map[decisionKey]decision{}}
}

// Wrap returns next behind the filter: a request without a bearer token, or
// whose token does not authenticate, gets 401; one whose identity may not
// "get" the path gets 403; one whose review fails gets 503.
func (a *AuthFilter) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", wwwAuthenticate)
			http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
			return
		}
		switch status := a.decide(r.Context(), token, r.URL.Path); status {
		case http.StatusOK:
			next.ServeHTTP(w, r)
		case http.StatusUnauthorized:
			w.Header().Set("WWW-Authenticate", wwwAuthenticate)
			http.Error(w, "Unauthorized", status)
		default:
			http.Error(w, fmt.Sprintf("Forbidden: get on %s is not allowed (decisions are kept for %v: a grant made since applies within %v)", r.URL.Path, decisionTTL, decisionTTL), status)
		}
	})
}

// bearerToken extracts the token of an "Authorization: Bearer <token>"
// header; the scheme is case-insensitive (RFC 7235), as kube-apiserver's is.
func bearerToken(header string) (string, bool) {
	fields := strings.Fields(header)
	if len(fields) != 2 || !strings.EqualFold(fields[0], "bearer") {
		return "", false
	}
	return fields[1], true
}

func (a *AuthFilter) decide(ctx context.Context, token, path string) int {
	key := decisionKey{token: sha256.Sum256([]byte(token)), path: path}
	now := time.Now()
	a.mu.Lock()
	d, ok := a.decisions[key]
	a.mu.Unlock()
	if ok && now.Before(d.expires) {
		return d.status
	}
	status := a.review(ctx, token, path)
	if status == http.StatusServiceUnavailable {
		return status // not cached: a later try may reach the API server
	}
	a.mu.Lock()
	if len(a.decisions) >= maxDecisions {
		clear(a.decisions)
	}
	a.decisions[key] = decision{status: status, expires: now.Add(decisionTTL)}
	a.mu.Unlock()
	return status
}

func (a *AuthFilter) review(ctx context.Context, token, path string) int {
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	tr, err := a.cs.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token},
	}, metav1.CreateOptions{})
	if err != nil {
		a.log.Error(err, "token review failed")
		return http.StatusServiceUnavailable
	}
	if !tr.Status.Authenticated {
		return http.StatusUnauthorized
	}
	u := tr.Status.User
	extra := make(map[string]authzv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	sar, err := a.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{
		Spec: authzv1.SubjectAccessReviewSpec{
			User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
			NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: "get"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		a.log.Error(err, "subject access review failed", "user", u.Username)
		return http.StatusServiceUnavailable
	}
	if !sar.Status.Allowed {
		a.log.V(1).Info("metrics request forbidden", "user", u.Username, "path", path)
		return http.StatusForbidden
	}
	return http.StatusOK
}
