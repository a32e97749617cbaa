package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"runtime/debug"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/go-logr/logr"

	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/object"
)

// admissionAPIVersion is the only AdmissionReview version served; webhook
// configurations list it in admissionReviewVersions.
var admissionAPIVersion = admissionv1.SchemeGroupVersion.String()

// DefaultingHandler returns the mutating webhook handler that runs d on T's
// creates and updates, served on MutatePath of T's kind. Other operations
// are allowed unchanged. T must be a pointer to a struct registered in
// scheme as one kind; d must not be nil, nor a typed nil.
func DefaultingHandler[T object.Object](scheme *runtime.Scheme, d Defaulter[T], opts HandlerOptions) (Handler, error) {
	if typednil.Is(d) {
		return nil, fmt.Errorf("webhook: DefaultingHandler[%v]: the Defaulter is nil (%T)", reflectName[T](), d)
	}
	return newAdmission(scheme, opts, MutatePath, func(ctx context.Context, a *admissionCall[T]) *admissionv1.AdmissionResponse {
		return a.mutate(ctx, d)
	})
}

// ValidatingHandler returns the validating webhook handler that runs v on T's
// creates, updates and deletes, served on ValidatePath of T's kind. CONNECT
// is allowed. T must be a pointer to a struct registered in scheme as one
// kind; v must not be nil, nor a typed nil.
func ValidatingHandler[T object.Object](scheme *runtime.Scheme, v Validator[T], opts HandlerOptions) (Handler, error) {
	if typednil.Is(v) {
		return nil, fmt.Errorf("webhook: ValidatingHandler[%v]: the Validator is nil (%T)", reflectName[T](), v)
	}
	return newAdmission(scheme, opts, ValidatePath, func(ctx context.Context, a *admissionCall[T]) *admissionv1.AdmissionResponse {
		return a.validate(ctx, v)
	})
}

// admission serves one kind's admission webhook.
type admission[T object.Object] struct {
	info   typeInfo[T]
	path   string
	opts   HandlerOptions
	handle func(ctx context.Context, a *admissionCall[T]) *admissionv1.AdmissionResponse
}

func newAdmission[T object.Object](scheme *runtime.Scheme, opts HandlerOptions, path func(schema.GroupVersionKind) string,
	handle func(context.Context, *admissionCall[T]) *admissionv1.AdmissionResponse) (Handler, error) {
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	info, err := inspect[T](scheme)
	if err != nil {
		return nil, fmt.Errorf("webhook: admission handler for %v: %w", reflectName[T](), err)
	}
	return &admission[T]{info: info, path: path(info.gvk), opts: opts.withDefaults(DefaultMaxRequestBytes), handle: handle}, nil
}

func (h *admission[T]) Path() string { return h.path }

// ServeHTTP answers an AdmissionReview (admission.k8s.io/v1).
func (h *admission[T]) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := readReview(r, h.opts.MaxRequestBytes)
	if err != nil {
		refuse(w, h.opts.Logger, h.path, err)
		return
	}
	var review admissionv1.AdmissionReview
	if err := utiljson.Unmarshal(body, &review); err != nil {
		refuse(w, h.opts.Logger, h.path, fmt.Errorf("request body is not an AdmissionReview: %w", err))
		return
	}
	if review.APIVersion != admissionAPIVersion || review.Kind != "AdmissionReview" {
		refuse(w, h.opts.Logger, h.path, fmt.Errorf("request body is %q %q, want %s AdmissionReview (admissionReviewVersions: [v1])", review.APIVersion, review.Kind, admissionAPIVersion))
		return
	}
	if review.Request == nil {
		refuse(w, h.opts.Logger, h.path, errors.New("AdmissionReview without a request"))
		return
	}
	req := review.Request
	log := h.opts.Logger.WithValues("webhook", h.path, "uid", req.UID, "kind", req.Kind, "namespace", req.Namespace, "name", req.Name, "operation", req.Operation)
	ctx, cancel := requestContext(r)
	defer cancel()
	ctx = logr.NewContext(context.WithValue(ctx, requestKey{}, req), log)
	resp := h.answer(ctx, req)
	resp.UID = req.UID
	if !resp.Allowed {
		log.V(1).Info("denied", "code", resp.Result.Code, "message", resp.Result.Message)
	}
	out, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp})
	if err != nil { // cannot happen: the response holds strings, bytes and numbers
		refuse(w, log, h.path, &httpError{http.StatusInternalServerError, "encode AdmissionReview: " + err.Error()})
		return
	}
	writeJSON(w, out)
}

// answer checks the request's kind and runs the handler, turning a panic
// into a denial, and a handler still running when ctx ends into a timeout.
func (h *admission[T]) answer(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	gvk := h.info.gvk
	if req.Kind.Group != gvk.Group || req.Kind.Version != gvk.Version || req.Kind.Kind != gvk.Kind {
		if req.SubResource != "" {
			// A subresource of another kind (a Scale, ...) sent by a rule
			// such as "sprockets/*": not T's to judge, so it passes
			// unchanged rather than breaking, say, kubectl scale.
			logr.FromContextOrDiscard(ctx).V(1).Info("allowed a subresource of another kind unchanged", "subresource", req.SubResource)
			return allow(nil)
		}
		return deny(http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("this webhook (%s) serves %s, not %s", h.path, gvk, kindString(req.Kind)))
	}
	return bounded(ctx, func() *admissionv1.AdmissionResponse {
		return h.handle(ctx, &admissionCall[T]{info: h.info, req: req})
	}, func(p any) *admissionv1.AdmissionResponse {
		logr.FromContextOrDiscard(ctx).Error(fmt.Errorf("panic: %v", p), "webhook panicked", "stack", string(debug.Stack()))
		return deny(http.StatusInternalServerError, metav1.StatusReasonInternalError, fmt.Sprintf("webhook %s panicked: %v", h.path, p))
	}, func(err error) *admissionv1.AdmissionResponse {
		logr.FromContextOrDiscard(ctx).Error(err, "webhook did not answer in time; answering without it")
		return deny(http.StatusGatewayTimeout, metav1.StatusReasonTimeout, fmt.Sprintf("webhook %s did not answer in time: %v", h.path, err))
	})
}

// admissionCall is one admission request for T.
type admissionCall[T object.Object] struct {
	info typeInfo[T]
	req  *admissionv1.AdmissionRequest
}

// decode decodes raw (the request's object or oldObject, named what) into
// a fresh T.
func (a *admissionCall[T]) decode(what string, raw runtime.RawExtension) (T, *admissionv1.AdmissionResponse) {
	obj := a.info.new()
	if len(raw.Raw) == 0 {
		return obj, deny(http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("%s request for %s without %s", a.req.Operation, a.info.gvk.Kind, what))
	}
	if err := utiljson.Unmarshal(raw.Raw, obj); err != nil {
		return obj, deny(http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("decode %s as %s: %v", what, a.info.gvk, err))
	}
	return obj, nil
}

func (a *admissionCall[T]) mutate(ctx context.Context, d Defaulter[T]) *admissionv1.AdmissionResponse {
	switch a.req.Operation {
	case admissionv1.Create, admissionv1.Update:
	default:
		return allow(nil)
	}
	obj, denied := a.decode("object", a.req.Object)
	if denied != nil {
		return denied
	}
	// The patch applies to the request's object, and lists only what the
	// Defaulter changed: the baseline is the decoded object encoded again,
	// so fields T does not know, and encoding differences, are left alone.
	before, err := json.Marshal(obj)
	if err != nil {
		return deny(http.StatusInternalServerError, metav1.StatusReasonInternalError, fmt.Sprintf("encode %s: %v", a.info.gvk.Kind, err))
	}
	if err := d.Default(ctx, obj); !typednil.Is(err) {
		return denyError(err)
	}
	after, err := json.Marshal(obj)
	if err != nil {
		return deny(http.StatusInternalServerError, metav1.StatusReasonInternalError, fmt.Sprintf("encode defaulted %s: %v", a.info.gvk.Kind, err))
	}
	patch, err := typedJSONPatch(a.req.Object.Raw, before, after, reflect.TypeOf(obj))
	if err != nil {
		return deny(http.StatusInternalServerError, metav1.StatusReasonInternalError, fmt.Sprintf("compute the patch of defaulted %s: %v", a.info.gvk.Kind, err))
	}
	resp := allow(nil)
	if len(patch) > 0 {
		resp.Patch = patch
		pt := admissionv1.PatchTypeJSONPatch
		resp.PatchType = &pt
	}
	return resp
}

func (a *admissionCall[T]) validate(ctx context.Context, v Validator[T]) *admissionv1.AdmissionResponse {
	var warnings Warnings
	var err error
	switch a.req.Operation {
	case admissionv1.Create:
		obj, denied := a.decode("object", a.req.Object)
		if denied != nil {
			return denied
		}
		warnings, err = v.ValidateCreate(ctx, obj)
	case admissionv1.Update:
		obj, denied := a.decode("object", a.req.Object)
		if denied != nil {
			return denied
		}
		old, denied := a.decode("oldObject", a.req.OldObject)
		if denied != nil {
			return denied
		}
		warnings, err = v.ValidateUpdate(ctx, old, obj)
	case admissionv1.Delete:
		old, denied := a.decode("oldObject", a.req.OldObject)
		if denied != nil {
			return denied
		}
		warnings, err = v.ValidateDelete(ctx, old)
	default:
		return allow(nil)
	}
	if !typednil.Is(err) {
		resp := denyError(err)
		resp.Warnings = warnings
		return resp
	}
	return allow(warnings)
}

func allow(warnings Warnings) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: true, Warnings: warnings}
}

func deny(code int32, reason metav1.StatusReason, msg string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg,
	}}
}

// denyError denies with err's text and code 403, or with err's own status
// when it is (or wraps) an apierrors.APIStatus.
func denyError(err error) *admissionv1.AdmissionResponse {
	var status apierrors.APIStatus
	if errors.As(err, &status) && !typednil.Is(status) {
		s := status.Status()
		if s.Code != 0 { // a status without a code would read as allowed to some clients
			s.Status = metav1.StatusFailure
			return &admissionv1.AdmissionResponse{Result: &s}
		}
	}
	return deny(http.StatusForbidden, metav1.StatusReasonForbidden, err.Error())
}

// requestKey is the context key of the admission request being served.
type requestKey struct{}

// RequestFromContext returns the admission request being served, from the
// context a Defaulter or Validator is called with (its user, operation,
// dry-run flag, ...). ok is false outside an admission handler. The request
// is shared: do not change it.
func RequestFromContext(ctx context.Context) (req *admissionv1.AdmissionRequest, ok bool) {
	req, ok = ctx.Value(requestKey{}).(*admissionv1.AdmissionRequest)
	return req, ok
}

func kindString(k metav1.GroupVersionKind) string {
	return k.Group + "/" + k.Version + ", Kind=" + k.Kind
}
