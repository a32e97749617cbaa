package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"runtime/debug"
	"sync"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/converge-dev/converge/internal/typednil"
	"github.com/converge-dev/converge/object"
)

// conversionAPIVersion is the only ConversionReview version served; CRDs
// list it in conversionReviewVersions.
var conversionAPIVersion = apiextensionsv1.SchemeGroupVersion.String()

// Conversion is the conversion webhook handler, served on ConvertPath, for
// every kind added with AddHub. It is safe for concurrent use, and kinds may
// be added while it serves.
type Conversion struct {
	scheme *runtime.Scheme
	opts   HandlerOptions

	mu sync.RWMutex
	// hubs holds the hub version of each kind added; mu guards it.
	hubs map[schema.GroupKind]schema.GroupVersionKind
}

var _ Handler = (*Conversion)(nil)

// NewConversion returns a conversion handler for kinds of scheme; add each
// kind with AddHub. It is an error if scheme is nil or opts are invalid.
func NewConversion(scheme *runtime.Scheme, opts HandlerOptions) (*Conversion, error) {
	if scheme == nil {
		return nil, errors.New("webhook: NewConversion: scheme is nil")
	}
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("webhook: NewConversion: %w", err)
	}
	return &Conversion{scheme: scheme, opts: opts.withDefaults(DefaultMaxConversionRequestBytes), hubs: map[schema.GroupKind]schema.GroupVersionKind{}}, nil
}

var convertibleType = reflect.TypeFor[Convertible]()

// AddHub makes c convert hub's kind: every version of that kind registered
// in c's scheme converts to and from hub's type, and each of them other than
// the hub must implement Convertible (on its pointer type). hub is an
// example, read only for its type (&v2.Widget{}; a typed nil will do). It is
// an error if hub is nil, if the scheme does not know its type, if a
// version does not implement Convertible, or if the kind was added before.
func (c *Conversion) AddHub(hub Hub) error {
	if hub == nil {
		return errors.New("webhook: AddHub: hub is nil")
	}
	t := reflect.TypeOf(hub)
	hubGVK, err := kindOf(c.scheme, t)
	if err != nil {
		return fmt.Errorf("webhook: AddHub(%v): %w", t, err)
	}
	gk := hubGVK.GroupKind()
	var errs []error
	for gvk, t := range c.scheme.AllKnownTypes() {
		if gvk.GroupKind() != gk || gvk.Version == hubGVK.Version || gvk.Version == runtime.APIVersionInternal {
			continue
		}
		if !reflect.PointerTo(t).Implements(convertibleType) {
			errs = append(errs, fmt.Errorf("version %s (%v) does not implement webhook.Convertible", gvk.Version, reflect.PointerTo(t)))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("webhook: AddHub(%v): every version of %s but the hub %s must convert through it: %w", t, gk, hubGVK.Version, errors.Join(errs...))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.hubs[gk]; ok {
		return fmt.Errorf("webhook: AddHub(%v): %s already converts through %s", t, gk, prev.Version)
	}
	c.hubs[gk] = hubGVK
	return nil
}

// Path returns ConvertPath.
func (c *Conversion) Path() string { return ConvertPath }

// ServeHTTP answers a ConversionReview (apiextensions.k8s.io/v1): it
// converts every object of the request to its desiredAPIVersion, or fails
// the whole review naming the first object it could not convert.
func (c *Conversion) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := readReview(r, c.opts.MaxRequestBytes)
	if err != nil {
		refuse(w, c.opts.Logger, ConvertPath, err)
		return
	}
	var review apiextensionsv1.ConversionReview
	if err := utiljson.Unmarshal(body, &review); err != nil {
		refuse(w, c.opts.Logger, ConvertPath, fmt.Errorf("request body is not a ConversionReview: %w", err))
		return
	}
	if review.APIVersion != conversionAPIVersion || review.Kind != "ConversionReview" {
		refuse(w, c.opts.Logger, ConvertPath, fmt.Errorf("request body is %q %q, want %s ConversionReview (conversionReviewVersions: [v1])", review.APIVersion, review.Kind, conversionAPIVersion))
		return
	}
	if review.Request == nil {
		refuse(w, c.opts.Logger, ConvertPath, errors.New("ConversionReview without a request"))
		return
	}
	req := review.Request
	log := c.opts.Logger.WithValues("webhook", ConvertPath, "uid", req.UID, "desiredAPIVersion", req.DesiredAPIVersion)
	resp := &apiextensionsv1.ConversionResponse{UID: req.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	ctx, cancel := requestContext(r)
	defer cancel()
	ctx = logr.NewContext(ctx, log)
	type result struct {
		converted []runtime.RawExtension
		err       error
	}
	res := bounded(ctx, func() result {
		converted, err := c.convertAll(ctx, req)
		return result{converted, err}
	}, func(p any) result {
		log.Error(fmt.Errorf("panic: %v", p), "conversion panicked", "stack", string(debug.Stack()))
		return result{err: fmt.Errorf("conversion panicked: %v", p)}
	}, func(err error) result {
		return result{err: fmt.Errorf("conversion did not answer in time: %w", err)}
	})
	converted, err := res.converted, res.err
	if err != nil {
		log.Error(err, "conversion failed")
		resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
	} else {
		resp.ConvertedObjects = converted
	}
	out, err := json.Marshal(apiextensionsv1.ConversionReview{TypeMeta: review.TypeMeta, Response: resp})
	if err != nil { // cannot happen: the response holds strings and raw JSON that encoded once
		refuse(w, log, ConvertPath, &httpError{http.StatusInternalServerError, "encode ConversionReview: " + err.Error()})
		return
	}
	writeJSON(w, out)
}

func (c *Conversion) convertAll(ctx context.Context, req *apiextensionsv1.ConversionRequest) (out []runtime.RawExtension, err error) {
	desired, err := schema.ParseGroupVersion(req.DesiredAPIVersion)
	if err != nil || desired.Version == "" {
		return nil, fmt.Errorf("desiredAPIVersion %q is not a group version", req.DesiredAPIVersion)
	}
	out = make([]runtime.RawExtension, 0, len(req.Objects))
	for i, raw := range req.Objects {
		conv, err := c.convertOne(ctx, raw.Raw, desired)
		if err != nil {
			return nil, fmt.Errorf("objects[%d]: %w", i, err)
		}
		out = append(out, runtime.RawExtension{Raw: conv})
	}
	return out, nil
}

// convertOne converts one object to desired, through the hub of its kind.
// The result keeps the object's metadata (see withMetadata).
func (c *Conversion) convertOne(_ context.Context, raw []byte, desired schema.GroupVersion) (out []byte, err error) {
	var meta struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata"`
	}
	if err := utiljson.Unmarshal(raw, &meta); err != nil {
		return nil, fmt.Errorf("not an object: %w", err)
	}
	from := meta.GroupVersionKind()
	name := fmt.Sprintf("%s %s", from.Kind, metaName(meta.Namespace, meta.Name))
	c.mu.RLock()
	hub, ok := c.hubs[from.GroupKind()]
	c.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%s: this webhook does not convert %s (apiVersion %q)", name, from.GroupKind(), meta.APIVersion)
	}
	if desired.Group != from.Group {
		return nil, fmt.Errorf("%s: cannot convert %s to another group's version %s", name, from.GroupKind(), desired)
	}
	if from.Version == desired.Version {
		return raw, nil
	}
	to := desired.WithKind(from.Kind)
	defer func() {
		if p := recover(); p != nil {
			c.opts.Logger.Error(fmt.Errorf("panic: %v", p), "conversion panicked", "stack", string(debug.Stack()))
			err = fmt.Errorf("%s: conversion from %s to %s panicked: %v", name, from.Version, to.Version, p)
		}
	}()
	src, err := c.newObject(from)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := utiljson.Unmarshal(raw, src); err != nil {
		return nil, fmt.Errorf("%s: decode as %s: %w", name, from, err)
	}
	dst, err := c.newObject(to)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := c.convert(src, dst, from, to, hub); !typednil.Is(err) {
		return nil, fmt.Errorf("%s: convert from %s to %s: %w", name, from.Version, to.Version, err)
	}
	dst.GetObjectKind().SetGroupVersionKind(to)
	return withMetadata(dst, meta.ObjectMeta)
}

// withMetadata encodes dst with the metadata of the object it was converted
// from, keeping only dst's labels and annotations (when it has any): the API
// server refuses a conversion that changes any other metadata.
func withMetadata(dst object.Object, m metav1.ObjectMeta) ([]byte, error) {
	if l := dst.GetLabels(); l != nil {
		m.Labels = l
	}
	if a := dst.GetAnnotations(); a != nil {
		m.Annotations = a
	}
	body, err := json.Marshal(dst)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := utiljson.Unmarshal(body, &fields); err != nil {
		return nil, fmt.Errorf("%T does not encode as a JSON object: %w", dst, err)
	}
	if fields["metadata"], err = json.Marshal(m); err != nil {
		return nil, err
	}
	return json.Marshal(fields)
}

// convert fills dst (of version to) from src (of version from) through
// the hub version. AddHub checked that every version but the hub implements
// Convertible, and that the hub's type implements Hub.
func (c *Conversion) convert(src, dst object.Object, from, to, hub schema.GroupVersionKind) error {
	switch hub.Version {
	case from.Version:
		return dst.(Convertible).ConvertFrom(src.(Hub))
	case to.Version:
		return src.(Convertible).ConvertTo(dst.(Hub))
	}
	hubObj, err := c.newObject(hub)
	if err != nil {
		return err
	}
	h := hubObj.(Hub)
	if err := src.(Convertible).ConvertTo(h); !typednil.Is(err) {
		return fmt.Errorf("to the hub %s: %w", hub.Version, err)
	}
	if err := dst.(Convertible).ConvertFrom(h); !typednil.Is(err) {
		return fmt.Errorf("from the hub %s: %w", hub.Version, err)
	}
	return nil
}

// newObject returns an empty object of gvk, an error if the scheme does not
// know it or it is not an object with metadata.
func (c *Conversion) newObject(gvk schema.GroupVersionKind) (object.Object, error) {
	o, err := c.scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("version %s is not in the scheme: %w", gvk.Version, err)
	}
	obj, ok := o.(object.Object)
	if !ok {
		return nil, fmt.Errorf("%s (%T) has no object metadata", gvk, o)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, nil
}

func metaName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
