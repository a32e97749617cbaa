package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-dev/converge/object"
)

// DefaultMaxRequestBytes is the largest request body a handler reads when
// HandlerOptions.MaxRequestBytes is zero: 7 MiB. kube-apiserver accepts
// objects of up to 3 MiB, and an AdmissionReview of an update carries the
// object twice (object and oldObject) plus the request's metadata, so a
// legitimate review stays under it; a larger body is refused with 413
// before it is decoded.
const DefaultMaxRequestBytes = 7 << 20

// DefaultMaxConversionRequestBytes is the largest request body the
// conversion handler reads when HandlerOptions.MaxRequestBytes is zero:
// 64 MiB. kube-apiserver converts a whole list in one ConversionReview,
// whatever its length (8 MiB is 2,000 objects of 4 KiB), and a list it
// cannot convert cannot be read at that version; raise the limit for
// larger collections.
const DefaultMaxConversionRequestBytes = 64 << 20

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
	// Zero means DefaultMaxRequestBytes for admission handlers and
	// DefaultMaxConversionRequestBytes for the conversion handler.
	MaxRequestBytes int64

	// Logger logs refused requests and recovered panics. The context a
	// Defaulter, Validator or conversion runs with carries it
	// (logr.FromContextOrDiscard), with the request's UID and, for
	// admission, the object's kind, namespace and name. Zero means no
	// logging.
	Logger logr.Logger
}

// withDefaults fills o's zero fields; maxBytes is the handler's default
// body limit.
func (o HandlerOptions) withDefaults(maxBytes int64) HandlerOptions {
	if o.MaxRequestBytes == 0 {
		o.MaxRequestBytes = maxBytes
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	return o
}

func (o HandlerOptions) validate() error {
	if o.MaxRequestBytes < 0 {
		return fmt.Errorf("HandlerOptions.MaxRequestBytes must not be negative, got %d", o.MaxRequestBytes)
	}
	return nil
}

// httpError is a request refused before it could be answered with a review:
// its status code and a message for the body.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

// readReview checks r's method and content type and reads its body, at most
// limit bytes. Its error is an *httpError.
func readReview(r *http.Request, limit int64) ([]byte, error) {
	if r.Method != http.MethodPost {
		return nil, &httpError{http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed: the API server POSTs reviews", r.Method)}
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return nil, &httpError{http.StatusUnsupportedMediaType, fmt.Sprintf("content type %q not supported: want application/json", ct)}
	}
	if r.ContentLength > limit {
		return nil, &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body of %d bytes is over the limit of %d", r.ContentLength, limit)}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, &httpError{http.StatusBadRequest, fmt.Sprintf("read request body: %v", err)}
	}
	if int64(len(body)) > limit {
		return nil, &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is over the limit of %d bytes", limit)}
	}
	if len(body) == 0 {
		return nil, &httpError{http.StatusBadRequest, "empty request body"}
	}
	return body, nil
}

// refuse answers err (an *httpError, or 400) in plain text and logs it.
func refuse(w http.ResponseWriter, log logr.Logger, path string, err error) {
	he := &httpError{code: http.StatusBadRequest, msg: err.Error()}
	errors.As(err, &he)
	log.V(1).Info("refused a webhook request", "path", path, "code", he.code, "reason", he.msg)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(he.code)
	_, _ = io.WriteString(w, he.msg+"\n")
}

// writeJSON answers v with 200.
func writeJSON(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// typeInfo is what a handler knows about its type T: the kind scheme gives
// it and how to make an empty one.
type typeInfo[T object.Object] struct {
	gvk  schema.GroupVersionKind
	elem reflect.Type // T's element type: T is a pointer
}

// inspect checks that T is a pointer to a struct registered in scheme.
func inspect[T object.Object](scheme *runtime.Scheme) (typeInfo[T], error) {
	t := reflect.TypeFor[T]()
	gvk, err := kindOf(scheme, t)
	if err != nil {
		return typeInfo[T]{}, err
	}
	return typeInfo[T]{gvk: gvk, elem: t.Elem()}, nil
}

// kindOf checks that t is a pointer to a struct registered in scheme as
// one kind, and returns that kind.
func kindOf(scheme *runtime.Scheme, t reflect.Type) (schema.GroupVersionKind, error) {
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return schema.GroupVersionKind{}, fmt.Errorf("%v is not a pointer to a struct", t)
	}
	if scheme == nil {
		return schema.GroupVersionKind{}, errors.New("scheme is nil")
	}
	if t == reflect.TypeFor[*unstructured.Unstructured]() || t == reflect.TypeFor[*metav1.PartialObjectMetadata]() {
		return schema.GroupVersionKind{}, fmt.Errorf("%v carries no kind of its own: a webhook needs a Go type registered in the scheme (a struct with the kind's fields)", t)
	}
	gvks, unversioned, err := scheme.ObjectKinds(reflect.New(t.Elem()).Interface().(runtime.Object))
	if err != nil || unversioned {
		return schema.GroupVersionKind{}, fmt.Errorf("%v is not a kind registered in the scheme: %w", t, err)
	}
	if len(gvks) > 1 {
		return schema.GroupVersionKind{}, fmt.Errorf("%v is registered as several kinds (%v); a webhook serves one", t, gvks)
	}
	return gvks[0], nil
}

func (i typeInfo[T]) new() T {
	return reflect.New(i.elem).Interface().(T)
}

// requestContext returns r's context, ending by the deadline the API server
// gives in the URL's timeout parameter (kube-apiserver sends the webhook's
// timeoutSeconds there, as "10s") when there is one.
func requestContext(r *http.Request) (context.Context, context.CancelFunc) {
	if d, err := time.ParseDuration(r.URL.Query().Get("timeout")); err == nil && d > 0 {
		return context.WithTimeout(r.Context(), d)
	}
	return context.WithCancel(r.Context())
}

// bounded returns run's result, or onPanic's if run panics, or onDone's
// (given ctx's cause) if ctx ends first: the API server has stopped
// waiting, and the answer is sent without run, which goes on in the
// background until it returns.
func bounded[R any](ctx context.Context, run func() R, onPanic func(p any) R, onDone func(error) R) R {
	results := make(chan R, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				results <- onPanic(p)
			}
		}()
		results <- run()
	}()
	select {
	case r := <-results:
		return r
	case <-ctx.Done():
		select {
		case r := <-results: // run returned as ctx ended
			return r
		default:
			return onDone(context.Cause(ctx))
		}
	}
}

// reflectName names T in errors, e.g. "*v1.Foo".
func reflectName[T any]() string { return reflect.TypeFor[T]().String() }
