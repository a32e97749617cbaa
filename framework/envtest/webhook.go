package envtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// WebhookOptions lists the webhook configurations and conversion webhooks
// InstallWebhooks points at a local webhook server.
type WebhookOptions struct {
	// Paths are YAML or JSON files, or folders of them, holding
	// MutatingWebhookConfigurations and ValidatingWebhookConfigurations
	// (admissionregistration.k8s.io/v1, kubebuilder's
	// config/webhook/manifests.yaml shape); other kinds in them are an
	// error. Zero means none.
	Paths []string

	// Mutating are mutating webhook configurations to install. Zero means
	// none.
	Mutating []admissionregistrationv1.MutatingWebhookConfiguration

	// Validating are validating webhook configurations to install. Zero
	// means none.
	Validating []admissionregistrationv1.ValidatingWebhookConfiguration

	// ConversionCRDs names installed CustomResourceDefinitions whose
	// spec.conversion becomes strategy Webhook, served by the local server
	// on /convert with conversionReviewVersions [v1]. Zero means none.
	ConversionCRDs []string
}

// WebhookServing is where the local webhook server must serve for the
// installed configurations to reach it.
type WebhookServing struct {
	// Addr is "127.0.0.1:<port>", a port that was free when InstallWebhooks
	// chose it: the server's address (framework's Options.Webhook.Addr).
	Addr string

	// CertDir holds tls.crt and tls.key, a serving certificate for
	// 127.0.0.1 and localhost signed by a CA the configurations trust
	// (framework's Options.Webhook.CertDir). Stop removes it.
	CertDir string

	// CABundle is the CA's certificate (PEM), as set in each caBundle.
	CABundle []byte
}

// InstallWebhooks generates a CA and a serving certificate, points every
// webhook of opts at https://<Addr><path> with the CA as caBundle (path is
// the webhook's clientConfig.service.path, or the path of its
// clientConfig.url, or "/"), creates the configurations (replacing those of
// the same name), and patches the named CRDs' conversion to strategy Webhook
// on https://<Addr>/convert (in place of a Service the CRD names there, as
// kubebuilder's conversion patch does). ctx and Options.StartTimeout bound it. It needs
// a local control plane (ErrNotLocal otherwise): an existing cluster's API
// server cannot reach 127.0.0.1 here.
//
// kube-apiserver applies new configurations a moment after they are
// created, asynchronously: start the webhook server on the returned Addr
// and CertDir, then wait with WebhookServing.Wait until a probe shows the
// webhooks are called.
func (e *Environment) InstallWebhooks(ctx context.Context, opts WebhookOptions) (WebhookServing, error) {
	e.lifecycle.Lock()
	defer e.lifecycle.Unlock()
	if _, err := e.localStarted(); err != nil {
		return WebhookServing{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, e.opts.StartTimeout)
	defer cancel()
	s, err := e.installWebhooks(ctx, opts)
	if err != nil {
		return WebhookServing{}, fmt.Errorf("envtest: install webhooks: %w", err)
	}
	return s, nil
}

func (e *Environment) installWebhooks(ctx context.Context, opts WebhookOptions) (WebhookServing, error) {
	mutating, validating, err := opts.load()
	if err != nil {
		return WebhookServing{}, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return WebhookServing{}, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	s, err := e.webhookCerts(addr)
	if err != nil {
		return WebhookServing{}, err
	}
	cfg := e.Config()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return WebhookServing{}, fmt.Errorf("client: %w", err)
	}
	for i := range mutating {
		c := &mutating[i]
		hooks := map[string]*admissionregistrationv1.WebhookClientConfig{}
		for j := range c.Webhooks {
			hooks[c.Webhooks[j].Name] = &c.Webhooks[j].ClientConfig
		}
		if err := installConfig(ctx, s, cs.AdmissionregistrationV1().MutatingWebhookConfigurations(), "MutatingWebhookConfiguration", c, hooks); err != nil {
			return WebhookServing{}, err
		}
	}
	for i := range validating {
		c := &validating[i]
		hooks := map[string]*admissionregistrationv1.WebhookClientConfig{}
		for j := range c.Webhooks {
			hooks[c.Webhooks[j].Name] = &c.Webhooks[j].ClientConfig
		}
		if err := installConfig(ctx, s, cs.AdmissionregistrationV1().ValidatingWebhookConfigurations(), "ValidatingWebhookConfiguration", c, hooks); err != nil {
			return WebhookServing{}, err
		}
	}
	if len(opts.ConversionCRDs) > 0 {
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return WebhookServing{}, fmt.Errorf("dynamic client: %w", err)
		}
		patch, err := json.Marshal(map[string]any{"spec": map[string]any{"conversion": map[string]any{
			"strategy": "Webhook",
			"webhook": map[string]any{
				// service: null drops the Service a kubebuilder CRD names
				// there (url and service are exclusive).
				"clientConfig":             map[string]any{"url": "https://" + addr + "/convert", "caBundle": s.CABundle, "service": nil},
				"conversionReviewVersions": []string{"v1"},
			},
		}}})
		if err != nil {
			return WebhookServing{}, err
		}
		for _, name := range opts.ConversionCRDs {
			if _, err := dyn.Resource(crdGVR).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				return WebhookServing{}, fmt.Errorf("CustomResourceDefinition %s: set the conversion webhook: %w", name, err)
			}
		}
	}
	return s, nil
}

// webhookCerts makes a CA and a serving certificate for 127.0.0.1 and
// localhost, and writes the certificate and key to a new folder under the
// Environment's.
func (e *Environment) webhookCerts(addr string) (WebhookServing, error) {
	ca, err := newAuthority()
	if err != nil {
		return WebhookServing{}, err
	}
	kp, err := ca.serving("converge-envtest-webhook", []string{"127.0.0.1", "localhost"})
	if err != nil {
		return WebhookServing{}, err
	}
	dir, err := os.MkdirTemp(e.Dir(), "webhook-")
	if err != nil {
		return WebhookServing{}, fmt.Errorf("webhook certificate folder: %w", err)
	}
	if err := writeFiles(dir, map[string][]byte{"tls.crt": kp.certPEM, "tls.key": kp.keyPEM}); err != nil {
		return WebhookServing{}, err
	}
	return WebhookServing{Addr: addr, CertDir: dir, CABundle: ca.certPEM}, nil
}

// point sets cc to call the local server, on the path cc names.
func (s WebhookServing) point(cc *admissionregistrationv1.WebhookClientConfig) error {
	path := "/"
	switch {
	case cc.Service != nil && cc.Service.Path != nil:
		path = *cc.Service.Path
	case cc.URL != nil:
		u, err := url.Parse(*cc.URL)
		if err != nil {
			return fmt.Errorf("clientConfig.url: %w", err)
		}
		if u.Path != "" {
			path = u.Path
		}
	}
	u := "https://" + s.Addr + path
	*cc = admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: s.CABundle}
	return nil
}

// configClient is the part of a webhook configuration client installConfig uses.
type configClient[T any] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// installConfig points the webhooks of c (its clientConfigs by webhook
// name) at s and creates c, deleting the configuration of the same name
// first if there is one.
func installConfig[C interface {
	runtime.Object
	GetName() string
}](ctx context.Context, s WebhookServing, cl configClient[C], kind string, c C, hooks map[string]*admissionregistrationv1.WebhookClientConfig) error {
	for name, cc := range hooks {
		if err := s.point(cc); err != nil {
			return fmt.Errorf("%s %s: webhook %s: %w", kind, c.GetName(), name, err)
		}
	}
	if err := cl.Delete(ctx, c.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("%s %s: delete the previous one: %w", kind, c.GetName(), err)
	}
	if _, err := cl.Create(ctx, c, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("%s %s: create: %w", kind, c.GetName(), err)
	}
	return nil
}

// load reads opts.Paths and returns every configuration of opts, copied so
// they can be changed.
func (o WebhookOptions) load() ([]admissionregistrationv1.MutatingWebhookConfiguration, []admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	var mutating []admissionregistrationv1.MutatingWebhookConfiguration
	var validating []admissionregistrationv1.ValidatingWebhookConfiguration
	for _, p := range o.Paths {
		objs, err := loadPath(p, "webhook configurations", checkWebhookConfiguration)
		if err != nil {
			return nil, nil, err
		}
		for _, u := range objs {
			js, err := u.MarshalJSON()
			if err == nil && u.GetKind() == "MutatingWebhookConfiguration" {
				var c admissionregistrationv1.MutatingWebhookConfiguration
				err = json.Unmarshal(js, &c)
				mutating = append(mutating, c)
			} else if err == nil {
				var c admissionregistrationv1.ValidatingWebhookConfiguration
				err = json.Unmarshal(js, &c)
				validating = append(validating, c)
			}
			if err != nil {
				return nil, nil, fmt.Errorf("read webhook configurations from %s: %s %s: %w", p, u.GetKind(), u.GetName(), err)
			}
		}
	}
	for _, c := range o.Mutating {
		mutating = append(mutating, *c.DeepCopy())
	}
	for _, c := range o.Validating {
		validating = append(validating, *c.DeepCopy())
	}
	for i := range mutating {
		mutating[i].ObjectMeta = cleanMeta(mutating[i].ObjectMeta)
	}
	for i := range validating {
		validating[i].ObjectMeta = cleanMeta(validating[i].ObjectMeta)
	}
	return mutating, validating, nil
}

// cleanMeta keeps what a create may carry.
func cleanMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Labels: m.Labels, Annotations: m.Annotations}
}

// checkWebhookConfiguration checks that u is a named v1 mutating or
// validating webhook configuration.
func checkWebhookConfiguration(u *unstructured.Unstructured) error {
	gvk := u.GroupVersionKind()
	if gvk.GroupVersion() != admissionregistrationv1.SchemeGroupVersion || (gvk.Kind != "MutatingWebhookConfiguration" && gvk.Kind != "ValidatingWebhookConfiguration") {
		return fmt.Errorf("%s %q is not an admissionregistration.k8s.io/v1 MutatingWebhookConfiguration or ValidatingWebhookConfiguration", gvk, u.GetName())
	}
	if u.GetName() == "" {
		return fmt.Errorf("%s without metadata.name", gvk.Kind)
	}
	return nil
}

// Wait calls probe until it returns nil, then returns nil; when ctx ends
// first it returns an error wrapping ctx's and probe's last error. Calls
// are 100 ms apart. A probe proves that the API server calls the webhooks,
// for example a dry-run create of an object the validator rejects that
// returns nil once the error carries the validator's message.
func (s WebhookServing) Wait(ctx context.Context, probe func(ctx context.Context) error) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		err := probe(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("envtest: webhooks on %s not called yet: %w", s.Addr, errors.Join(ctx.Err(), err))
		case <-t.C:
		}
	}
}
