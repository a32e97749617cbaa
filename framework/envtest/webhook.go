package envtest

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// WebhookOptions lists the webhook configurations and conversion webhooks
// InstallWebhooks points at a local webhook server.
type WebhookOptions struct {
	// Paths are YAML or JSON files, or folders of them, holding
	// MutatingWebhookConfigurations and ValidatingWebhookConfigurations
	// (kubebuilder's config/webhook/manifests.yaml shape); other kinds in
	// them are an error. Zero means none.
	Paths []string

	// Mutating are mutating webhook configurations to install. Zero means
	// none.
	Mutating []admissionregistrationv1.MutatingWebhookConfiguration

	// Validating are validating webhook configurations to install. Zero
	// means none.
	Validating []admissionregistrationv1.ValidatingWebhookConfiguration

	// ConversionCRDs names installed CustomResourceDefinitions whose
	// spec.conversion becomes strategy Webhook, served by the local server
	// on /convert (conversionReviewVersions v1). Zero means none.
	ConversionCRDs []string
}

// WebhookServing is where the local webhook server must serve for the
// installed configurations to reach it.
type WebhookServing struct {
	// Addr is "127.0.0.1:<port>", a port free when InstallWebhooks chose
	// it: the server's listen address (framework's Options.Webhook.Addr).
	Addr string

	// CertDir holds tls.crt and tls.key, a serving certificate for
	// 127.0.0.1 and localhost signed by a CA the configurations trust
	// (framework's Options.Webhook.CertDir). Stop removes it.
	CertDir string

	// CABundle is the PEM of the CA, as set in each configuration's caBundle.
	CABundle []byte
}

// InstallWebhooks generates a CA and a serving certificate, rewrites the
// clientConfig of every webhook in opts to url
// "https://<Addr><service path>" with the CA as caBundle (a webhook without
// a service path gets "/"), creates the configurations (replacing ones of
// the same name) and patches the named CRDs' conversion to strategy Webhook.
// It needs a local control plane (ErrNotLocal otherwise): an existing
// cluster's API server cannot reach 127.0.0.1 on this machine.
//
// The API server applies new configurations asynchronously, a moment after
// they are created: start the webhook server on the returned Addr and
// CertDir, then wait with WebhookServing.Wait before relying on them.
func (e *Environment) InstallWebhooks(ctx context.Context, opts WebhookOptions) (WebhookServing, error) {
	panic("TODO")
}

// Wait calls probe until it returns nil, backing off between calls, and
// returns nil then or ctx's error (wrapping probe's last error) when ctx
// ends first. A probe proves that the API server calls the webhooks: for
// example a dry-run create of an object the validator rejects, returning nil
// once the error carries the validator's message.
func (s WebhookServing) Wait(ctx context.Context, probe func(ctx context.Context) error) error {
	panic("TODO")
}
