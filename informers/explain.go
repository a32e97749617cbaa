package informers

import (
	"context"
	"errors"
	"net"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// RequestError describes one failed list or watch request of an informer.
type RequestError struct {
	Informer  string                  // the informer's description
	Kind      schema.GroupVersionKind // its kind
	Resource  string                  // the API resource, "" if the kind never mapped to one
	Namespace string                  // "" for all namespaces
	Verb      string                  // "list" or "watch"
	Class     string                  // see ErrorClass
	Err       error
}

// ErrorClass classifies a list or watch error in one word, for metrics and
// alerts: forbidden, unauthorized, not_found, unreachable, timeout, other.
func ErrorClass(err error) string {
	var opErr *net.OpError
	switch {
	case apierrors.IsForbidden(err):
		return "forbidden"
	case apierrors.IsUnauthorized(err):
		return "unauthorized"
	case meta.IsNoMatchError(err), apierrors.IsNotFound(err):
		return "not_found"
	case errors.Is(err, syscall.ECONNREFUSED), errors.As(err, &opErr):
		return "unreachable"
	case errors.Is(err, context.DeadlineExceeded), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return "timeout"
	}
	return "other"
}

// explain turns a list or watch error into a short cause a user can act on.
func explain(err error, resource string) string {
	what := resource
	if what == "" {
		what = "the resource"
	}
	var opErr *net.OpError
	switch {
	case apierrors.IsForbidden(err):
		return "forbidden: the controller's identity may not list and watch " + what + " (grant list and watch in its RBAC role)"
	case apierrors.IsUnauthorized(err):
		return "unauthorized: the API server rejected the controller's credentials"
	case meta.IsNoMatchError(err):
		return "resource not found: the API server serves no such kind (is its CRD installed?)"
	case apierrors.IsNotFound(err):
		return "resource not found: " + what + " is not served (was its CRD deleted?)"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused: the API server is not reachable"
	case errors.As(err, &opErr):
		return "network error: the API server is not reachable"
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out: the API server did not answer in time"
	}
	return "list or watch failed"
}
