package e2e_test

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/framework/webhook"
)

// ConfigMap webhooks of the spec below: every ConfigMap gets the label
// defaulted=yes and loses its data key "drop"; data key "frozen" cannot
// change; a ConfigMap labelled protected=true cannot be deleted; a dry run
// earns a warning; "probe-deny" is refused (the probe).
var (
	configMapDefaulter = webhook.DefaulterFunc[*corev1.ConfigMap](func(_ context.Context, cm *corev1.ConfigMap) error {
		if cm.Labels == nil {
			cm.Labels = map[string]string{}
		}
		cm.Labels["defaulted"] = "yes"
		delete(cm.Data, "drop")
		return nil
	})
	configMapValidator = webhook.ValidatorFuncs[*corev1.ConfigMap]{
		Create: func(ctx context.Context, cm *corev1.ConfigMap) (webhook.Warnings, error) {
			var w webhook.Warnings
			if req, ok := webhook.RequestFromContext(ctx); ok && req.DryRun != nil && *req.DryRun {
				w = append(w, "dry run of "+cm.Name)
			}
			if cm.Name == "probe-deny" {
				return w, fmt.Errorf("probe denied")
			}
			return w, nil
		},
		Update: func(_ context.Context, old, cm *corev1.ConfigMap) (webhook.Warnings, error) {
			if old.Data["frozen"] != cm.Data["frozen"] {
				return nil, fmt.Errorf("frozen cannot change from %q to %q", old.Data["frozen"], cm.Data["frozen"])
			}
			return nil, nil
		},
		Delete: func(_ context.Context, cm *corev1.ConfigMap) (webhook.Warnings, error) {
			if cm.Labels["protected"] == "true" {
				return nil, fmt.Errorf("configmap %s is protected", cm.Name)
			}
			return nil, nil
		},
	}
)

var _ = Describe("webhooks on a built-in kind", func() {
	It("patches server-side-applied objects on create and update, validates updates from oldObject and deletes, and sees dry runs", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		selector := &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}
		rule := func(ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
			return []admissionregistrationv1.RuleWithOperations{{Operations: ops,
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}
		}
		gvk := corev1.SchemeGroupVersion.WithKind("ConfigMap")
		mutatePath, validatePath := webhook.MutatePath(gvk), webhook.ValidatePath(gvk)
		service := func(path *string) admissionregistrationv1.WebhookClientConfig {
			return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Name: "webhook-service", Namespace: "system", Path: path}}
		}
		name := "configmaps-" + ns
		serving, err := env.InstallWebhooks(ctx, envtest.WebhookOptions{
			Mutating: []admissionregistrationv1.MutatingWebhookConfiguration{{ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: []admissionregistrationv1.MutatingWebhook{{
				Name: "mcm.converge.dev", AdmissionReviewVersions: []string{"v1"}, ClientConfig: service(&mutatePath),
				SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), NamespaceSelector: selector,
				Rules: rule(admissionregistrationv1.Create, admissionregistrationv1.Update),
			}}}},
			Validating: []admissionregistrationv1.ValidatingWebhookConfiguration{{ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name: "vcm.converge.dev", AdmissionReviewVersions: []string{"v1"}, ClientConfig: service(&validatePath),
				SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), NamespaceSelector: selector,
				Rules: rule(admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete),
			}}}},
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())
			Expect(kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())
		})
		mgr := newManager(ns, framework.Options{Webhook: framework.WebhookServerOptions{Addr: serving.Addr, CertDir: serving.CertDir}})
		Expect(framework.AddWebhook(mgr, framework.WebhookOptions[*corev1.ConfigMap]{Defaulter: configMapDefaulter, Validator: configMapValidator})).To(Succeed())
		startManager(ctx, mgr)

		c, warnings := recordingWarnings()
		cs, err := kubernetes.NewForConfig(c)
		Expect(err).NotTo(HaveOccurred())
		cms := cs.CoreV1().ConfigMaps(ns)
		dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
		Expect(serving.Wait(ctx, func(ctx context.Context) error {
			_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe-deny"}}, dryRun)
			if err != nil && strings.Contains(err.Error(), "probe denied") {
				return nil
			}
			return fmt.Errorf("probe create: %v", err)
		})).To(Succeed())
		Expect(warnings.received()).To(ContainElement("dry run of probe-deny"), "the Validator sees the dry-run flag")

		By("a server-side apply (managedFields) gets the defaults")
		applied, err := cms.Apply(ctx, corev1ac.ConfigMap("a", ns).WithData(map[string]string{"keep": "1", "drop": "2", "frozen": "x"}),
			metav1.ApplyOptions{FieldManager: "e2e", Force: true})
		Expect(err).NotTo(HaveOccurred())
		Expect(applied.Labels).To(HaveKeyWithValue("defaulted", "yes"))
		Expect(applied.Data).To(Equal(map[string]string{"keep": "1", "frozen": "x"}))
		Expect(applied.ManagedFields).NotTo(BeEmpty())

		By("an update is patched too, and validated against oldObject")
		applied.Data["drop"], applied.Data["more"] = "again", "3"
		delete(applied.Labels, "defaulted")
		updated, err := cms.Update(ctx, applied, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(updated.Labels).To(HaveKeyWithValue("defaulted", "yes"))
		Expect(updated.Data).To(Equal(map[string]string{"keep": "1", "frozen": "x", "more": "3"}))
		updated.Data["frozen"] = "y"
		_, err = cms.Update(ctx, updated, metav1.UpdateOptions{})
		Expect(err).To(MatchError(ContainSubstring(`frozen cannot change from "x" to "y"`)))

		By("a delete is validated on the stored object")
		updated.Data["frozen"] = "x"
		updated.Labels["protected"] = "true"
		_, err = cms.Update(ctx, updated, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		err = cms.Delete(ctx, "a", metav1.DeleteOptions{})
		Expect(err).To(MatchError(ContainSubstring("configmap a is protected")))
		_, err = cms.Patch(ctx, "a", types.MergePatchType, []byte(`{"metadata":{"labels":{"protected":null}}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(cms.Delete(ctx, "a", metav1.DeleteOptions{})).To(Succeed())
	})
})

var _ = Describe("webhooks: InstallWebhooks", func() {
	It("points a CRD whose conversion goes through a Service (kubebuilder's kustomize output) at the local server", func(ctx SpecContext) {
		Expect(env.InstallCRDs(ctx, envtest.CRDOptions{Paths: []string{"testdata/cogs-kubebuilder.yaml"}})).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(dyn.Resource(crdGVR).Delete(ctx, "cogs.cogs.converge.dev", metav1.DeleteOptions{})).To(Succeed())
		})
		serving, err := env.InstallWebhooks(ctx, envtest.WebhookOptions{ConversionCRDs: []string{"cogs.cogs.converge.dev"}})
		Expect(err).NotTo(HaveOccurred())
		crd, err := dyn.Resource(crdGVR).Get(ctx, "cogs.cogs.converge.dev", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		cc, _, err := unstructured.NestedMap(crd.Object, "spec", "conversion", "webhook", "clientConfig")
		Expect(err).NotTo(HaveOccurred())
		Expect(cc).To(HaveKeyWithValue("url", "https://"+serving.Addr+"/convert"))
		Expect(cc).NotTo(HaveKey("service"))
	})
})
