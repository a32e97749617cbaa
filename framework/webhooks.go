package framework

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/converge-dev/converge/framework/internal/runner"
	"github.com/converge-dev/converge/framework/internal/serving"
	"github.com/converge-dev/converge/framework/webhook"
	"github.com/converge-dev/converge/object"
)

// WebhookOptions says which admission webhooks AddWebhook serves for T.
// At least one field must be set.
type WebhookOptions[T object.Object] struct {
	// Defaulter sets T's defaults on create and update, served as a
	// mutating webhook on webhook.MutatePath of T's kind. Zero (nil) means
	// no mutating webhook for T.
	Defaulter webhook.Defaulter[T]

	// Validator admits or denies T's creates, updates and deletes, served
	// as a validating webhook on webhook.ValidatePath of T's kind. Zero
	// (nil) means no validating webhook for T.
	Validator webhook.Validator[T]
}

// AddWebhook registers admission webhooks for T (a type registered in the
// manager's scheme) on the manager's webhook server (Options.Webhook). Start
// runs that server on every replica, leader or not, from the start (before
// the caches have synced: a handler that reads the cache must wait for it).
// It is an error to register no webhook, to pass a typed nil Defaulter or
// Validator (the error names the field), to register a webhook of the same
// kind and version twice, or to register after Start.
func AddWebhook[T object.Object](mgr *Manager, opts WebhookOptions[T]) error {
	name := fmt.Sprintf("AddWebhook[%v]", reflect.TypeFor[T]())
	if opts.Defaulter == nil && opts.Validator == nil {
		return fmt.Errorf("framework: %s: WebhookOptions sets neither Defaulter nor Validator", name)
	}
	hopts := mgr.webhookHandlerOptions()
	var handlers []webhook.Handler
	if opts.Defaulter != nil {
		h, err := webhook.DefaultingHandler(mgr.Scheme(), opts.Defaulter, hopts)
		if err != nil {
			return fmt.Errorf("framework: %s: WebhookOptions.Defaulter: %w", name, err)
		}
		handlers = append(handlers, h)
	}
	if opts.Validator != nil {
		h, err := webhook.ValidatingHandler(mgr.Scheme(), opts.Validator, hopts)
		if err != nil {
			return fmt.Errorf("framework: %s: WebhookOptions.Validator: %w", name, err)
		}
		handlers = append(handlers, h)
	}
	mgr.mu.Lock()
	defer mgr.mu.Unlock()
	if err := mgr.canAddWebhookLocked(); err != nil {
		return fmt.Errorf("framework: %s: %w", name, err)
	}
	for _, h := range handlers {
		if mgr.webhooks[h.Path()] != nil {
			return fmt.Errorf("framework: %s: a webhook for this kind and version is already registered on %s", name, h.Path())
		}
	}
	for _, h := range handlers {
		mgr.webhooks[h.Path()] = h
	}
	return nil
}

// AddConversion serves the conversion webhook (webhook.ConvertPath) for
// hub's kind on the manager's webhook server: every version of that kind
// registered in the manager's scheme converts through hub's type, and each
// version other than the hub must implement webhook.Convertible. hub is an
// example, read only for its type (&v2.Widget{}). It is an error if hub is
// nil, if a version does not implement webhook.Convertible, if the kind was
// registered before, or after Start.
//
// A manager serving a conversion webhook is ready (/readyz) without waiting
// for its caches: the API server calls the webhook through a Service, which
// routes only to ready pods, and a cache of a kind stored at another version
// cannot sync until that call succeeds.
func AddConversion(mgr *Manager, hub webhook.Hub) error {
	name := fmt.Sprintf("AddConversion(%T)", hub)
	mgr.mu.Lock()
	defer mgr.mu.Unlock()
	if err := mgr.canAddWebhookLocked(); err != nil {
		return fmt.Errorf("framework: %s: %w", name, err)
	}
	if mgr.conversion == nil {
		c, err := webhook.NewConversion(mgr.Scheme(), mgr.webhookHandlerOptions())
		if err != nil {
			return fmt.Errorf("framework: %s: %w", name, err)
		}
		mgr.conversion = c
	}
	if err := mgr.conversion.AddHub(hub); err != nil {
		return fmt.Errorf("framework: %w", err)
	}
	mgr.webhooks[webhook.ConvertPath] = mgr.conversion
	return nil
}

func (m *Manager) webhookHandlerOptions() webhook.HandlerOptions {
	return webhook.HandlerOptions{Logger: m.log.WithName("webhook"), MaxRequestBytes: m.opts.Webhook.MaxRequestBytes}
}

// canAddWebhookLocked refuses registrations once the server's routes are
// fixed. The caller holds mu.
func (m *Manager) canAddWebhookLocked() error {
	if m.started {
		return errors.New("webhooks must be registered before Manager.Start")
	}
	return nil
}

// startWebhookServer serves the registered webhooks over TLS on g, if any
// are registered: the certificate pair must load (it is read again when
// it changes), and readiness waits until the server listens with a valid
// certificate.
func (m *Manager) startWebhookServer(g *runner.Group) error {
	m.mu.Lock()
	mux := http.NewServeMux()
	for path, h := range m.webhooks {
		mux.Handle(path, h)
	}
	n := len(m.webhooks)
	m.mu.Unlock()
	if n == 0 {
		return nil
	}
	o := m.opts.Webhook
	certs, err := serving.NewCertWatcher("webhook", o.CertDir, o.CertName, o.KeyName)
	if err != nil {
		return err
	}
	var listening atomic.Bool
	m.mu.Lock()
	m.readyChecks[webhookReadyCheck] = func(*http.Request) error {
		if !listening.Load() {
			return errors.New("the webhook server is not listening yet")
		}
		return certs.Check()
	}
	m.mu.Unlock()
	l, err := serving.Listen("webhooks", "Options.Webhook.Addr", o.Addr)
	if err != nil {
		return err
	}
	m.setAddr(&m.webhookAddr, l)
	srv := serving.NewServer(mux)
	srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout = o.ReadTimeout, o.WriteTimeout, o.IdleTimeout
	if !o.EnableHTTP2 {
		serving.DisableHTTP2(srv)
	}
	listening.Store(true)
	g.Start(serve(srv, l, serving.ServerTLSConfig(certs.GetCertificate, o.EnableHTTP2)))
	m.log.V(1).Info("serving webhooks", "address", l.Addr().String(), "paths", n, "certDir", o.CertDir)
	return nil
}

// webhookReadyCheck names the webhook server's readiness check.
const webhookReadyCheck = "webhook-server"

// WebhookAddress returns the address the webhooks are served on (useful
// with a ":0" address), or "" when none is registered or Start has not
// opened it.
func (m *Manager) WebhookAddress() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.webhookAddr
}

const (
	defaultWebhookAddr         = ":9443"
	defaultWebhookReadTimeout  = 30 * time.Second
	defaultWebhookWriteTimeout = 30 * time.Second
	// defaultWebhookIdleTimeout outlasts the 90 s kube-apiserver's
	// webhook client keeps an idle connection, so the client drops it
	// first and never sends a request on a connection the server closes.
	defaultWebhookIdleTimeout = 120 * time.Second
)

func (o WebhookServerOptions) withDefaults() WebhookServerOptions {
	if o.Addr == "" {
		o.Addr = defaultWebhookAddr
	}
	if o.CertDir == "" {
		o.CertDir = filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs")
	}
	if o.CertName == "" {
		o.CertName = "tls.crt"
	}
	if o.KeyName == "" {
		o.KeyName = "tls.key"
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = defaultWebhookReadTimeout
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = defaultWebhookWriteTimeout
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = defaultWebhookIdleTimeout
	}
	return o
}

func (o WebhookServerOptions) validate() []error {
	var errs []error
	if o.MaxRequestBytes < 0 {
		errs = append(errs, fmt.Errorf("Options.Webhook.MaxRequestBytes must not be negative, got %d", o.MaxRequestBytes))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"ReadTimeout", o.ReadTimeout}, {"WriteTimeout", o.WriteTimeout}, {"IdleTimeout", o.IdleTimeout}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("Options.Webhook.%s must not be negative, got %v", d.name, d.v))
		}
	}
	return errs
}
