package fake

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/converge-dev/converge/object"
)

// request is a request for a resource: its kind, namespace, name and
// subresource (each may be empty).
type request struct {
	kind          *kind
	ns, name, sub string
}

func (q request) String() string {
	s := q.kind.String()
	if q.ns != "" {
		s += " " + q.ns + "/" + q.name
	} else if q.name != "" {
		s += " " + q.name
	}
	if q.sub != "" {
		s += " (" + q.sub + ")"
	}
	return s
}

func (s *Server) routes() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		var gv schema.GroupVersion
		switch {
		case len(segs) == 1 && segs[0] == "version":
			s.serveVersion(w)
			return
		case len(segs) == 1 && (segs[0] == "readyz" || segs[0] == "livez" || segs[0] == "healthz"):
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("ok"))
			return
		case len(segs) == 1 && segs[0] == "api":
			s.serveAPIVersions(w)
			return
		case len(segs) == 1 && segs[0] == "apis":
			s.serveGroups(w)
			return
		case len(segs) == 2 && segs[0] == "apis":
			s.serveGroup(w, segs[1])
			return
		case len(segs) >= 2 && segs[0] == "api":
			gv, segs = schema.GroupVersion{Version: segs[1]}, segs[2:]
		case len(segs) >= 3 && segs[0] == "apis":
			gv, segs = schema.GroupVersion{Group: segs[1], Version: segs[2]}, segs[3:]
		default:
			s.writeError(w, r, nil, apierrors.NewNotFound(schema.GroupResource{}, r.URL.Path))
			return
		}
		if len(segs) == 0 {
			s.serveResources(w, r, gv)
			return
		}
		q, err := s.parse(gv, segs)
		if err != nil {
			s.writeError(w, r, nil, err)
			return
		}
		s.serveFaulty(w, r, q)
	})
}

// parse reads [namespaces/<ns>/]<resource>[/<name>[/<subresource>]].
func (s *Server) parse(gv schema.GroupVersion, segs []string) (request, error) {
	var q request
	if segs[0] == "namespaces" && len(segs) >= 3 {
		if _, ok := s.kinds.byGVR[gv.WithResource(segs[2])]; ok || len(segs) > 3 {
			q.ns, segs = segs[1], segs[2:]
		}
	}
	k, ok := s.kinds.byGVR[gv.WithResource(segs[0])]
	if !ok || len(segs) > 3 || (q.ns != "" && !k.namespaced) {
		return q, apierrors.NewNotFound(gv.WithResource(segs[0]).GroupResource(), "")
	}
	q.kind = k
	if len(segs) > 1 {
		q.name = segs[1]
	}
	if len(segs) > 2 {
		q.sub = segs[2]
		if q.sub != "status" || !k.status {
			return q, apierrors.NewNotFound(k.gvr.GroupResource(), q.name+"/"+q.sub)
		}
	}
	return q, nil
}

func (s *Server) serveResource(w http.ResponseWriter, r *http.Request, q request) {
	var (
		out  runtime.Object
		code = http.StatusOK
		err  error
	)
	if r.URL.Query().Has("dryRun") {
		s.writeError(w, r, &q, apierrors.NewBadRequest(fmt.Sprintf("%s: dry run is not emulated by the fake API server", q)))
		return
	}
	switch {
	case r.Method == http.MethodGet && q.name != "":
		s.mu.Lock()
		out, err = s.getLocked(q.kind, q.ns, q.name)
		s.mu.Unlock()
	case r.Method == http.MethodGet && (r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1"):
		s.serveWatch(w, r, q)
		return
	case r.Method == http.MethodGet:
		out, err = s.list(r, q)
	case r.Method == http.MethodPost && q.name == "" && q.sub == "":
		out, err = s.create(r, q)
		code = http.StatusCreated
	case r.Method == http.MethodPut && q.name != "":
		out, err = s.update(r, q)
	case r.Method == http.MethodPatch && q.name != "":
		var created bool
		if out, created, err = s.patch(r, q); created {
			code = http.StatusCreated // an apply that created the object
		}
	case r.Method == http.MethodDelete && q.name != "" && q.sub == "":
		out, err = s.delete(r, q)
	case r.Method == http.MethodDelete && q.name == "":
		out, err = s.deleteCollection(r, q)
	default:
		err = apierrors.NewMethodNotSupported(q.kind.gvr.GroupResource(), r.Method)
	}
	if err != nil {
		s.writeError(w, r, &q, err)
		return
	}
	negotiate(s.codecs, r.Header.Get("Accept"), q.kind.proto).write(w, code, out)
}

// writeError answers with err as a metav1.Status; an error that is not an
// API error is an internal error naming the request.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, q *request, err error) {
	status, ok := err.(apierrors.APIStatus)
	if !ok {
		what := r.Method + " " + r.URL.Path
		if q != nil {
			what = q.String()
		}
		status = apierrors.NewInternalError(fmt.Errorf("%s: %w", what, err))
	}
	st := status.Status()
	st.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}
	enc := negotiate(s.codecs, r.Header.Get("Accept"), true)
	enc.metadata = false
	enc.contentType = enc.info.MediaType
	enc.write(w, int(st.Code), &st)
}

// manager is the request's field manager: its fieldManager parameter, or
// its user agent's program name, as the API server does.
func manager(r *http.Request) string {
	if m := r.URL.Query().Get("fieldManager"); m != "" {
		return m
	}
	ua, _, _ := strings.Cut(r.UserAgent(), "/")
	return ua
}

// decode reads the request's object, of q's kind.
func (s *Server) decode(r *http.Request, q request) (object.Object, error) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s: read body: %v", q, err))
	}
	into, err := s.newObject(q.kind)
	if err != nil {
		return nil, err
	}
	got, gvk, err := s.codecs.UniversalDeserializer().Decode(data, &q.kind.gvk, into)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s: decode body: %v", q, err))
	}
	if *gvk != q.kind.gvk {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s: the body is a %s, not a %s", q, gvk, q.kind.gvk))
	}
	obj, ok := got.(object.Object)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s: the body (%T) has no object metadata", q, got))
	}
	return obj, nil
}

func (s *Server) create(r *http.Request, q request) (runtime.Object, error) {
	obj, err := s.decode(r, q)
	if err != nil {
		return nil, err
	}
	if obj.GetResourceVersion() != "" {
		// The API server's storage refuses it with an error of no API
		// status: 500, with no reason and the error as the message.
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
			Message: "resourceVersion should not be set on objects to be created"}}
	}
	defer s.lockWrite(r)()
	return s.createLocked(q.kind, q.ns, obj, manager(r), false, false)
}

func (s *Server) update(r *http.Request, q request) (runtime.Object, error) {
	obj, err := s.decode(r, q)
	if err != nil {
		return nil, err
	}
	if q.kind.custom() && obj.GetResourceVersion() == "" {
		// Custom resources allow no unconditional update.
		return nil, invalid(q.kind, q.name, field.Invalid(field.NewPath("metadata", "resourceVersion"), 0, "must be specified for an update"))
	}
	defer s.lockWrite(r)()
	return s.updateLocked(q.kind, q.ns, q.name, q.sub, obj, manager(r), false)
}

// patch applies the request's patch; created says that an apply created
// the object.
func (s *Server) patch(r *http.Request, q request) (out runtime.Object, created bool, err error) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, false, apierrors.NewBadRequest(fmt.Sprintf("%s: read body: %v", q, err))
	}
	pt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if types.PatchType(pt) == types.ApplyPatchType {
		return s.apply(r, q, data)
	}
	out, err = s.mergePatch(r, q, types.PatchType(pt), data, manager(r))
	return out, false, err
}

// mergePatch applies a JSON patch, JSON merge patch or strategic merge
// patch, recorded under manager.
func (s *Server) mergePatch(r *http.Request, q request, pt types.PatchType, data []byte, manager string) (runtime.Object, error) {
	defer s.lockWrite(r)()
	old, err := s.getLocked(q.kind, q.ns, q.name)
	if err != nil {
		return nil, err
	}
	current, err := json.Marshal(old)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	next, err := s.newObject(q.kind)
	if err != nil {
		return nil, err
	}
	var patched []byte
	switch pt {
	case types.JSONPatchType:
		var p jsonpatch.Patch
		if p, err = jsonpatch.DecodePatch(data); err == nil {
			patched, err = p.Apply(current)
		}
	case types.MergePatchType:
		patched, err = jsonpatch.MergePatch(current, data)
	case types.StrategicMergePatchType:
		if !q.kind.proto {
			return nil, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", q.kind.gvr.GroupResource(), q.name,
				fmt.Sprintf("strategic merge patch is not supported for %s: it has no patch strategy (a custom resource); use a JSON merge patch or server-side apply", q.kind), 0, false)
		}
		patched, err = strategicpatch.StrategicMergePatch(current, data, next)
	default:
		return nil, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", q.kind.gvr.GroupResource(), q.name,
			fmt.Sprintf("%s: unsupported patch type %q", q, pt), 0, false)
	}
	if err != nil {
		return nil, invalidPatch(q, err)
	}
	if err := json.Unmarshal(patched, next); err != nil {
		return nil, invalidPatch(q, err)
	}
	if uid := next.GetUID(); uid != "" && uid != old.GetUID() {
		return nil, uidImmutable(q.kind, q.name, uid)
	}
	return s.updateLocked(q.kind, q.ns, q.name, q.sub, next, manager, false)
}

func invalidPatch(q request, err error) error {
	return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "patch", q.kind.gvr.GroupResource(), q.name,
		fmt.Sprintf("%s: the patch cannot be applied: %v", q, err), 0, false)
}

// apply is a server-side apply of data (YAML or JSON) by the request's
// field manager; created says that it created the object (201 on
// kube-apiserver).
func (s *Server) apply(r *http.Request, q request, data []byte) (out runtime.Object, created bool, err error) {
	applied := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &applied.Object); err != nil {
		return nil, false, apierrors.NewBadRequest(fmt.Sprintf("%s: decode apply configuration: %v", q, err))
	}
	if gvk := applied.GroupVersionKind(); gvk != q.kind.gvk {
		return nil, false, apierrors.NewBadRequest(fmt.Sprintf("%s: the apply configuration is a %s, not a %s", q, gvk, q.kind.gvk))
	}
	if n := applied.GetName(); n != "" && n != q.name {
		return nil, false, apierrors.NewBadRequest(fmt.Sprintf("%s: the name of the object (%q) does not match the name on the URL (%q)", q, n, q.name))
	}
	applied.SetName(q.name)
	if q.kind.namespaced {
		if ns := applied.GetNamespace(); ns != "" && ns != q.ns {
			return nil, false, apierrors.NewBadRequest(fmt.Sprintf("%s: the namespace of the provided object (%q) does not match the namespace sent on the request (%q)", q, ns, q.ns))
		}
		applied.SetNamespace(q.ns)
	}
	mgr := r.URL.Query().Get("fieldManager")
	if mgr == "" {
		return nil, false, invalid(q.kind, q.name, fieldRequired("fieldManager", "is required for apply requests"))
	}
	force := r.URL.Query().Get("force") == "true"

	defer s.lockWrite(r)()
	live, err := s.getLocked(q.kind, q.ns, q.name)
	exists := err == nil
	uid := applied.GetUID()
	switch {
	case exists && uid != "" && uid != live.GetUID():
		return nil, false, uidImmutable(q.kind, q.name, uid)
	case exists:
	case !apierrors.IsNotFound(err) || q.sub != "":
		return nil, false, err
	case uid != "":
		// The UID is a precondition no object meets: nothing is created.
		return nil, false, conflict(q.kind, q.name, fmt.Errorf("uid mismatch: the provided object specified uid %s, and no existing object was found", uid))
	default:
		if live, err = s.newObject(q.kind); err != nil {
			return nil, false, err
		}
	}
	fm, err := s.fieldManagerLocked(q.kind, q.sub)
	if err != nil {
		return nil, false, err
	}
	applyOut, err := fm.Apply(live.DeepCopyObject(), applied, mgr, force) // live is shared: the field manager gets a copy
	if err != nil {
		if _, ok := err.(apierrors.APIStatus); ok {
			return nil, false, err
		}
		return nil, false, invalid(q.kind, q.name, fieldInvalid("body", err.Error()))
	}
	obj, err := s.typedObject(q.kind, applyOut)
	if err != nil {
		return nil, false, err
	}
	if !exists {
		out, err = s.createLocked(q.kind, q.ns, obj, mgr, true, false)
		return out, err == nil, err
	}
	out, err = s.updateLocked(q.kind, q.ns, q.name, q.sub, obj, mgr, true)
	return out, false, err
}

// deleteOptions reads a deletion's options from its body (JSON or
// protobuf) and parameters.
func (s *Server) deleteOptions(r *http.Request, q request) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s: read body: %v", q, err))
	}
	if len(strings.TrimSpace(string(data))) > 0 {
		gvk := metav1.SchemeGroupVersion.WithKind("DeleteOptions")
		if _, _, err := s.codecs.UniversalDeserializer().Decode(data, &gvk, opts); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("%s: decode delete options: %v", q, err))
		}
	}
	if p := r.URL.Query().Get("propagationPolicy"); p != "" {
		policy := metav1.DeletionPropagation(p)
		opts.PropagationPolicy = &policy
	}
	return opts, nil
}

func (s *Server) delete(r *http.Request, q request) (runtime.Object, error) {
	opts, err := s.deleteOptions(r, q)
	if err != nil {
		return nil, err
	}
	defer s.lockWrite(r)()
	return s.deleteLocked(q.kind, q.ns, q.name, opts)
}

// selection is what a list, watch or deletecollection selects.
type selection struct {
	ns     string
	labels labels.Selector
	fields fields.Selector
}

func (sel selection) matches(obj object.Object) bool {
	if sel.ns != "" && obj.GetNamespace() != sel.ns {
		return false
	}
	if !sel.labels.Matches(labels.Set(obj.GetLabels())) {
		return false
	}
	return sel.fields.Matches(fields.Set{"metadata.name": obj.GetName(), "metadata.namespace": obj.GetNamespace()})
}

// listOptions reads the request's list options and selection.
func listOptions(r *http.Request, q request) (metav1.ListOptions, selection, error) {
	var lo metav1.ListOptions
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(r.URL.Query(), metav1.SchemeGroupVersion, &lo); err != nil {
		return lo, selection{}, apierrors.NewBadRequest(fmt.Sprintf("%s: list options: %v", q, err))
	}
	sel := selection{ns: q.ns, labels: labels.Everything(), fields: fields.Everything()}
	var err error
	if lo.LabelSelector != "" {
		if sel.labels, err = labels.Parse(lo.LabelSelector); err != nil {
			return lo, sel, apierrors.NewBadRequest(fmt.Sprintf("%s: label selector %q: %v", q, lo.LabelSelector, err))
		}
	}
	if lo.FieldSelector != "" {
		if sel.fields, err = fields.ParseSelector(lo.FieldSelector); err != nil {
			return lo, sel, apierrors.NewBadRequest(fmt.Sprintf("%s: field selector %q: %v", q, lo.FieldSelector, err))
		}
		for _, req := range sel.fields.Requirements() {
			if req.Field != "metadata.name" && req.Field != "metadata.namespace" {
				return lo, sel, apierrors.NewBadRequest(fmt.Sprintf("%s: field label not supported: %s (only metadata.name and metadata.namespace)", q, req.Field))
			}
		}
	}
	return lo, sel, nil
}

// selectLocked returns the objects of k that sel selects, sorted by
// namespace and name.
func (s *Server) selectLocked(k *kind, sel selection) []object.Object {
	var out []object.Object
	for _, obj := range s.objects[k] {
		if sel.matches(obj) {
			out = append(out, obj)
		}
	}
	sortObjects(out)
	return out
}

// newList returns a list of k holding objs, at resourceVersion rv.
func (s *Server) newList(k *kind, objs []object.Object, rv string) (runtime.Object, error) {
	listGVK := k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List")
	list, err := s.scheme.New(listGVK)
	if err != nil {
		return nil, fmt.Errorf("new %s: %w", listGVK, err)
	}
	list.GetObjectKind().SetGroupVersionKind(listGVK)
	items := make([]runtime.Object, len(objs))
	for i, o := range objs {
		items[i] = o
	}
	if err := setList(list, items, rv); err != nil {
		return nil, fmt.Errorf("fill %s: %w", listGVK, err)
	}
	return list, nil
}

func (s *Server) list(r *http.Request, q request) (runtime.Object, error) {
	lo, sel, err := listOptions(r, q)
	if err != nil {
		return nil, err
	}
	if _, err := parseResourceVersion(q, lo.ResourceVersion); err != nil {
		return nil, err // any valid one lists the current objects
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newList(q.kind, s.selectLocked(q.kind, sel), fmt.Sprint(s.rv))
}

// deleteCollection deletes every selected object and answers with the
// list of them as they were deleted.
func (s *Server) deleteCollection(r *http.Request, q request) (runtime.Object, error) {
	_, sel, err := listOptions(r, q)
	if err != nil {
		return nil, err
	}
	opts, err := s.deleteOptions(r, q)
	if err != nil {
		return nil, err
	}
	defer s.lockWrite(r)()
	var deleted []object.Object
	for _, obj := range s.selectLocked(q.kind, sel) {
		out, err := s.deleteLocked(q.kind, obj.GetNamespace(), obj.GetName(), opts)
		if apierrors.IsNotFound(err) {
			continue // collected with an owner deleted before it
		}
		if err != nil {
			return nil, err
		}
		deleted = append(deleted, out)
	}
	return s.newList(q.kind, deleted, fmt.Sprint(s.rv))
}
