package webhook

import (
	"context"

	admissionv1 "k8s.io/api/admission/v1"
	"net/http"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/converge-dev/converge/object"
)

// DefaultMaxRequestBytes is the largest request body a handler reads when
// HandlerOptions.MaxRequestBytes is zero: 7 MiB. kube-apiserver accepts
// objects of up to 3 MiB, and an AdmissionReview of an update carries the
// object twice (object and oldObject) plus the request's metadata, so a
// legitimate review stays well under it; anything larger is refused with 413
// before it is decoded.
const DefaultMaxRequestBytes = 7 << 20

// Handler is a webhook handler and the path it is served on.
type Handler interface {
	http.Handler
	// Path is where the API server calls the handler (MutatePath,
	// ValidatePath or ConvertPath).
	Path() string
}

// HandlerOptions configures a handler. The zero value is valid.
type HandlerOptions struct {
	// MaxRequestBytes bounds the request body; a larger body gets 413.
	// Zero means DefaultMaxRequestBytes.
	MaxRequestBytes int64

	// Logger logs failed requests and recovered panics; each request's
	// context carries it (logr.FromContextOrDiscard) with the request's UID,
	// kind, namespace and name. Zero means no logging.
	Logger logr.Logger
}

// NewDefaulting returns the mutating webhook handler that runs d on T's
// creates and updates (other operations are allowed unchanged), served on
// MutatePath of T's kind. T's kind is looked up in scheme; it is an error if
// scheme does not know T, or if d is nil.
func NewDefaulting[T object.Object](scheme *runtime.Scheme, d Defaulter[T], opts HandlerOptions) (Handler, error) {
	panic("TODO")
}

// NewValidating returns the validating webhook handler that runs v on T's
// creates, updates and deletes (CONNECT is allowed), served on ValidatePath
// of T's kind. It is an error if scheme does not know T, or if v is nil.
func NewValidating[T object.Object](scheme *runtime.Scheme, v Validator[T], opts HandlerOptions) (Handler, error) {
	panic("TODO")
}

// Conversion is the conversion webhook handler, served on ConvertPath, for
// every kind added with AddHub. It is safe for concurrent use; kinds may be
// added while it serves.
type Conversion struct {
	// TODO
}

var _ Handler = (*Conversion)(nil)

// NewConversion returns a conversion handler that converts objects of the
// types in scheme; add each kind with AddHub.
func NewConversion(scheme *runtime.Scheme, opts HandlerOptions) *Conversion {
	panic("TODO")
}

// AddHub makes c convert H's kind: every version of that kind registered in
// c's scheme converts to and from H, and each of them other than H must
// implement Convertible. It is an error if the scheme does not know H, if a
// version does not implement Convertible, or if the kind was added before.
func AddHub[H Hub](c *Conversion) error {
	panic("TODO")
}

// Path returns ConvertPath.
func (c *Conversion) Path() string { return ConvertPath }

// ServeHTTP answers a ConversionReview (apiextensions.k8s.io/v1).
func (c *Conversion) ServeHTTP(w http.ResponseWriter, r *http.Request) { panic("TODO") }

// RequestFromContext returns the admission request being served, from the
// context a Defaulter or Validator is called with (its user, operation,
// dry-run flag, ...). ok is false outside an admission handler.
func RequestFromContext(ctx context.Context) (req *admissionv1.AdmissionRequest, ok bool) {
	panic("TODO")
}
