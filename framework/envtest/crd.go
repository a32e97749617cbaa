package envtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
)

// crdGVR is the resource of CustomResourceDefinitions.
var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// crdFieldManager owns the fields of the CRDs that InstallCRDs applies.
const crdFieldManager = "converge-envtest"

// InstallCRDs creates the CRDs of crds, or updates them when they exist (server-side
// apply, forcing conflicts), and returns once every one is Established and discovery
// lists its plural in every served version, so clients may use them at once. ctx and
// Options.StartTimeout bound it.
func (e *Environment) InstallCRDs(ctx context.Context, crds CRDOptions) error {
	if err := crds.validate(); err != nil {
		return fmt.Errorf("envtest: install CRDs: %w", err)
	}
	e.lifecycle.Lock()
	defer e.lifecycle.Unlock()
	if err := e.started(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, e.opts.StartTimeout)
	defer cancel()
	if err := e.installCRDs(ctx, crds); err != nil {
		return fmt.Errorf("envtest: %w", err)
	}
	return nil
}

// installCRDs does InstallCRDs' work for Start and InstallCRDs; the caller holds
// lifecycle, and e.cfg is set.
func (e *Environment) installCRDs(ctx context.Context, crds CRDOptions) error {
	objs, err := crds.load()
	if err != nil {
		return fmt.Errorf("install CRDs: %w", err)
	}
	cfg := e.Config()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("install CRDs: dynamic client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("install CRDs: discovery client: %w", err)
	}
	crdClient := dyn.Resource(crdGVR)
	for _, o := range objs {
		opts := metav1.ApplyOptions{FieldManager: crdFieldManager, Force: true}
		if _, err := crdClient.Apply(ctx, o.GetName(), o, opts); err != nil {
			return fmt.Errorf("install CRD %s: apply: %w", o.GetName(), err)
		}
	}
	for _, o := range objs {
		if err := waitCRDReady(ctx, crdClient, disc, o.GetName()); err != nil {
			return fmt.Errorf("install CRD %s: %w", o.GetName(), err)
		}
	}
	return nil
}

// waitCRDReady polls until the CRD called name is Established and discovery lists its
// plural in every served version.
func waitCRDReady(ctx context.Context, crds dynamic.ResourceInterface, disc discovery.DiscoveryInterface, name string) error {
	var last error
	for {
		last = crdReady(ctx, crds, disc, name)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w (last check: %w)", ctx.Err(), last)
		case <-time.After(pollInterval):
		}
	}
}

// crdReady reports why the CRD called name is not yet usable, or nil.
func crdReady(ctx context.Context, crds dynamic.ResourceInterface, disc discovery.DiscoveryInterface, name string) error {
	crd, err := crds.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	established := slices.ContainsFunc(conditions, func(c any) bool {
		m, _ := c.(map[string]any)
		return m["type"] == "Established" && m["status"] == "True"
	})
	if !established {
		return errors.New("not Established")
	}
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		version, _ := m["name"].(string)
		if served, _ := m["served"].(bool); !served {
			continue
		}
		gv := group + "/" + version
		list, err := disc.ServerResourcesForGroupVersion(gv)
		if err != nil {
			return fmt.Errorf("discover %s: %w", gv, err)
		}
		if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == plural }) {
			return fmt.Errorf("discovery of %s does not list %s yet", gv, plural)
		}
	}
	return nil
}

// load reads and checks every CRD of c, Paths first, and returns them ready to apply.
func (c CRDOptions) load() ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, p := range c.Paths {
		objs, err := loadPath(p, "CRDs", checkCRD)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	for i, o := range c.Objects {
		u, err := toUnstructured(o)
		if err != nil {
			return nil, fmt.Errorf("CRDs.Objects[%d]: %w", i, err)
		}
		if err := checkCRD(u); err != nil {
			return nil, fmt.Errorf("CRDs.Objects[%d]: %w", i, err)
		}
		out = append(out, u)
	}
	return out, nil
}

// loadPath reads the objects (what: "CRDs", ...) of a file, or of the *.yaml, *.yml and
// *.json files of a folder, each checked (and trimmed) by check.
func loadPath(path, what string, check func(*unstructured.Unstructured) error) ([]*unstructured.Unstructured, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	if !fi.IsDir() {
		return loadFile(path, what, check)
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	var out []*unstructured.Unstructured
	for _, ent := range entries {
		switch strings.ToLower(filepath.Ext(ent.Name())) {
		case ".yaml", ".yml", ".json":
		default:
			continue
		}
		if ent.IsDir() {
			continue
		}
		objs, err := loadFile(filepath.Join(path, ent.Name()), what, check)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// loadFile reads the objects of a YAML or JSON file with one or more documents.
func loadFile(path, what string, check func(*unstructured.Unstructured) error) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	defer f.Close()
	var out []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s from %s: document %d: %w", what, path, doc, err)
		}
		js, err := utilyaml.ToJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("read %s from %s: document %d: %w", what, path, doc, err)
		}
		if js = bytes.TrimSpace(js); len(js) == 0 || bytes.Equal(js, []byte("null")) {
			continue // empty document, such as one holding only comments
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("read %s from %s: document %d: %w", what, path, doc, err)
		}
		if err := check(u); err != nil {
			return nil, fmt.Errorf("read %s from %s: document %d: %w", what, path, doc, err)
		}
		out = append(out, u)
	}
}

// toUnstructured converts o to a fresh Unstructured, taking an empty apiVersion and kind
// to be a v1 CustomResourceDefinition (typed objects often leave TypeMeta empty).
func toUnstructured(o runtime.Object) (*unstructured.Unstructured, error) {
	var u *unstructured.Unstructured
	if uo, ok := o.(*unstructured.Unstructured); ok {
		u = uo.DeepCopy()
	} else {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, fmt.Errorf("convert %T: %w", o, err)
		}
		u = &unstructured.Unstructured{Object: m}
	}
	if u.GetAPIVersion() == "" && u.GetKind() == "" {
		u.SetAPIVersion(crdGVR.GroupVersion().String())
		u.SetKind("CustomResourceDefinition")
	}
	return u, nil
}

// checkCRD checks that u is a named v1 CRD and strips what apply must not send: status
// and the server-set metadata.
func checkCRD(u *unstructured.Unstructured) error {
	gvk := u.GroupVersionKind()
	if gvk.Group != crdGVR.Group || gvk.Kind != "CustomResourceDefinition" {
		return fmt.Errorf("%s %q is not a CustomResourceDefinition", gvk, u.GetName())
	}
	if gvk.Version != crdGVR.Version {
		return fmt.Errorf("CustomResourceDefinition %q is %s; only %s is served", u.GetName(), gvk.GroupVersion(), crdGVR.GroupVersion())
	}
	if u.GetName() == "" {
		return errors.New("CustomResourceDefinition without metadata.name")
	}
	unstructured.RemoveNestedField(u.Object, "status")
	for _, f := range []string{"resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	return nil
}
