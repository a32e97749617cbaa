package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/framework/webhook"
	"github.com/converge-dev/converge/internal/testapi"
)

const sprocketCRD = "sprockets.sprockets.converge.dev"

var (
	sprocketsV1 = testapi.V1.WithResource("sprockets")
	sprocketsV2 = testapi.V2.WithResource("sprockets")
)

// The Sprockets' webhooks: teeth default to 12 and paint to black; more
// than 100 teeth are refused; red paint earns a warning.
var (
	sprocketDefaulter = webhook.DefaulterFunc[*testapi.Sprocket](func(_ context.Context, s *testapi.Sprocket) error {
		if s.Spec.Teeth == 0 {
			s.Spec.Teeth = 12
		}
		if s.Spec.Paint.Color == "" {
			s.Spec.Paint.Color = "black"
		}
		return nil
	})
	sprocketValidator = webhook.ValidatorFuncs[*testapi.Sprocket]{
		Create: func(_ context.Context, s *testapi.Sprocket) (webhook.Warnings, error) {
			var warnings webhook.Warnings
			if s.Spec.Paint.Color == "red" {
				warnings = append(warnings, "red paint fades in sunlight")
			}
			if s.Spec.Teeth > 100 {
				return warnings, fmt.Errorf("a sprocket has at most 100 teeth, not %d", s.Spec.Teeth)
			}
			return warnings, nil
		},
	}
)

// warningRecorder collects the warnings the API server sends a client.
type warningRecorder struct {
	mu sync.Mutex
	// texts are the warnings received; mu guards them.
	texts []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.texts = append(w.texts, text)
}

// recordingWarnings returns a copy of the suite's config whose clients
// record the warnings they receive.
func recordingWarnings() (*rest.Config, *warningRecorder) {
	w := &warningRecorder{}
	c := rest.CopyConfig(cfg)
	c.WarningHandler = w
	return c, w
}

func (w *warningRecorder) received() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.texts...)
}

// sprocketServer is a spec's namespace with the Sprockets' webhooks served
// by a manager, and a client that records warnings.
type sprocketServer struct {
	ns       string
	dyn      dynamic.Interface
	warnings *warningRecorder
}

// serveSprockets installs the Sprocket CRD and its webhooks, pointed at a
// manager started for the spec, and returns once the API server calls them.
func serveSprockets(ctx SpecContext) sprocketServer {
	GinkgoHelper()
	ns := newNamespace(ctx)
	Expect(env.InstallCRDs(ctx, envtest.CRDOptions{Paths: []string{"testdata/sprockets.yaml"}})).To(Succeed())
	serving, err := env.InstallWebhooks(ctx, envtest.WebhookOptions{
		Paths:          []string{"testdata/sprocket-webhooks.yaml"},
		ConversionCRDs: []string{sprocketCRD},
	})
	Expect(err).NotTo(HaveOccurred(), "InstallWebhooks")

	scheme := runtime.NewScheme()
	Expect(errors.Join(clientgoscheme.AddToScheme(scheme), testapi.AddToScheme(scheme))).To(Succeed())
	mgr := newManager(ns, framework.Options{Scheme: scheme, Webhook: framework.WebhookServerOptions{Addr: serving.Addr, CertDir: serving.CertDir}})
	Expect(framework.AddWebhook(mgr, framework.WebhookOptions[*testapi.Sprocket]{Defaulter: sprocketDefaulter, Validator: sprocketValidator})).To(Succeed())
	Expect(framework.AddConversion(mgr, &testapi.Sprocket{})).To(Succeed())
	startManager(ctx, mgr)

	c, warnings := recordingWarnings()
	d, err := dynamic.NewForConfig(c)
	Expect(err).NotTo(HaveOccurred())

	// The probe: a dry-run create at v1 that the validator refuses passes
	// through the conversion webhook (v1 → v2) and both admission webhooks,
	// so its message shows that all of them are in place.
	Expect(serving.Wait(ctx, func(ctx context.Context) error {
		_, err := dyn.Resource(sprocketsV1).Namespace(ns).Create(ctx, sprocket("v1", "probe", map[string]any{"teeth": int64(999)}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), "a sprocket has at most 100 teeth, not 999") {
			return nil
		}
		return fmt.Errorf("probe create: %v", err)
	})).To(Succeed())

	// Delete the spec's Sprockets while the server still converts them,
	// before the manager stops (cleanups run last in, first out), so the
	// cluster's controllers never meet one they cannot read.
	DeferCleanup(func(ctx SpecContext) {
		Expect(dyn.Resource(sprocketsV1).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})).To(Succeed())
	})
	return sprocketServer{ns: ns, dyn: d, warnings: warnings}
}

func sprocket(version, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": testapi.Group + "/" + version, "kind": "Sprocket",
		"metadata": map[string]any{"name": name},
		"spec":     spec,
	}}
}

func (s sprocketServer) create(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return s.dyn.Resource(gvr).Namespace(s.ns).Create(ctx, obj, metav1.CreateOptions{})
}

func (s sprocketServer) get(ctx context.Context, gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	GinkgoHelper()
	u, err := s.dyn.Resource(gvr).Namespace(s.ns).Get(ctx, name, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred(), "get %s %s", gvr.Version, name)
	return u
}

var _ = Describe("webhooks", func() {
	It("refuses a create the validator denies, with the validator's message", func(ctx SpecContext) {
		s := serveSprockets(ctx)
		_, err := s.create(ctx, sprocketsV2, sprocket("v2", "huge", map[string]any{"teeth": int64(500)}))
		Expect(err).To(HaveOccurred())
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a validator's plain error is a 403: %v", err)
		Expect(err.Error()).To(Equal(`admission webhook "vsprocket.converge.dev" denied the request: a sprocket has at most 100 teeth, not 500`))
		_, err = s.dyn.Resource(sprocketsV2).Namespace(s.ns).Get(ctx, "huge", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the refused Sprocket exists: %v", err)
	})

	It("applies the defaulter's defaults on create, at either version", func(ctx SpecContext) {
		s := serveSprockets(ctx)
		got, err := s.create(ctx, sprocketsV2, sprocket("v2", "plain", map[string]any{}))
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Object["spec"]).To(Equal(map[string]any{"teeth": int64(12), "paint": map[string]any{"color": "black"}}))

		got, err = s.create(ctx, sprocketsV1, sprocket("v1", "old-style", map[string]any{"teeth": int64(30)}))
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Object["spec"]).To(Equal(map[string]any{"teeth": int64(30), "color": "black"}), "the default set at v2 reaches the v1 object")
	})

	It("stores a Sprocket at v1 and reads it back at v2 and v1 with its fields converted", func(ctx SpecContext) {
		s := serveSprockets(ctx)
		_, err := s.create(ctx, sprocketsV1, sprocket("v1", "green", map[string]any{"teeth": int64(7), "color": "green"}))
		Expect(err).NotTo(HaveOccurred())
		_, err = s.create(ctx, sprocketsV2, sprocket("v2", "blue", map[string]any{"teeth": int64(9), "paint": map[string]any{"color": "blue"}}))
		Expect(err).NotTo(HaveOccurred())

		crd, err := dyn.Resource(crdGVR).Get(ctx, sprocketCRD, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(crd.Object["status"]).To(HaveKeyWithValue("storedVersions", []any{"v1"}), "Sprockets are stored at v1 only")

		Expect(s.get(ctx, sprocketsV2, "green").Object["spec"]).To(Equal(map[string]any{"teeth": int64(7), "paint": map[string]any{"color": "green"}}))
		Expect(s.get(ctx, sprocketsV1, "green").Object["spec"]).To(Equal(map[string]any{"teeth": int64(7), "color": "green"}))
		Expect(s.get(ctx, sprocketsV1, "blue").Object["spec"]).To(Equal(map[string]any{"teeth": int64(9), "color": "blue"}))
		v2 := s.get(ctx, sprocketsV2, "blue")
		Expect(v2.GetAPIVersion()).To(Equal("sprockets.converge.dev/v2"))
		Expect(v2.Object["spec"]).To(Equal(map[string]any{"teeth": int64(9), "paint": map[string]any{"color": "blue"}}))

		list, err := s.dyn.Resource(sprocketsV2).Namespace(s.ns).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Items).To(HaveLen(2), "a list converts every item")
		for _, item := range list.Items {
			Expect(item.GetAPIVersion()).To(Equal("sprockets.converge.dev/v2"))
			Expect(item.Object["spec"]).To(HaveKey("paint"))
		}
	})

	It("passes the validator's warnings to the client", func(ctx SpecContext) {
		s := serveSprockets(ctx)
		_, err := s.create(ctx, sprocketsV2, sprocket("v2", "red", map[string]any{"paint": map[string]any{"color": "red"}}))
		Expect(err).NotTo(HaveOccurred())
		Expect(s.warnings.received()).To(ContainElement("red paint fades in sunlight"))
	})

	It("fails or admits creates as the failurePolicy says when the webhook server is down", func(ctx SpecContext) {
		failNS, ignoreNS := newNamespace(ctx), newNamespace(ctx)
		path := webhook.ValidatePath(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		hook := func(name, ns string, policy admissionregistrationv1.FailurePolicyType) admissionregistrationv1.ValidatingWebhook {
			return admissionregistrationv1.ValidatingWebhook{
				Name:                    name,
				AdmissionReviewVersions: []string{"v1"},
				ClientConfig:            admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Name: "webhook-service", Namespace: "system", Path: &path}},
				FailurePolicy:           &policy,
				SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
				NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
				Rules: []admissionregistrationv1.RuleWithOperations{{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				}},
			}
		}
		// Both webhooks in one configuration, which the API server applies
		// as a whole: once the Fail one is seen, the Ignore one is in force.
		name := "down-" + failNS
		_, err := env.InstallWebhooks(ctx, envtest.WebhookOptions{Validating: []admissionregistrationv1.ValidatingWebhookConfiguration{{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Webhooks:   []admissionregistrationv1.ValidatingWebhook{hook("fail.converge.dev", failNS, admissionregistrationv1.Fail), hook("ignore.converge.dev", ignoreNS, admissionregistrationv1.Ignore)},
		}}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())
		})
		// No server listens on the address InstallWebhooks chose.

		cm := func(name string) *corev1.ConfigMap {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
		}
		dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
		Eventually(ctx, func() error {
			_, err := kube.CoreV1().ConfigMaps(failNS).Create(ctx, cm("probe"), dryRun)
			return err
		}).Should(MatchError(ContainSubstring(`failed calling webhook "fail.converge.dev"`)), "failurePolicy Fail refuses while the server is down")
		_, err = kube.CoreV1().ConfigMaps(failNS).Create(ctx, cm("refused"), metav1.CreateOptions{})
		Expect(err).To(MatchError(ContainSubstring("connection refused")))
		Expect(apierrors.IsInternalError(err)).To(BeTrue(), "a failed webhook call is an internal error: %v", err)

		_, err = kube.CoreV1().ConfigMaps(ignoreNS).Create(ctx, cm("admitted"), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred(), "failurePolicy Ignore admits while the server is down")
	})
})
