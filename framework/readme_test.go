package framework_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/framework/webhook"
	v2 "github.com/converge-dev/converge/internal/testapi"
	"github.com/converge-dev/converge/internal/testenv"
)

// readmeWebhooks is the README's Webhooks example, between the markers, so
// that it compiles and runs; testapi.Sprocket is a v2 Sprocket, the hub.
func readmeWebhooks(mgr *framework.Manager) error {
	// README begin
	// Teeth default to 12; more than 100 are refused; red paint earns a warning.
	err := framework.AddWebhook(mgr, framework.WebhookOptions[*v2.Sprocket]{
		Defaulter: webhook.DefaulterFunc[*v2.Sprocket](func(ctx context.Context, s *v2.Sprocket) error {
			if s.Spec.Teeth == 0 {
				s.Spec.Teeth = 12
			}
			return nil
		}),
		Validator: webhook.ValidatorFuncs[*v2.Sprocket]{
			Create: func(ctx context.Context, s *v2.Sprocket) (webhook.Warnings, error) {
				var w webhook.Warnings
				if s.Spec.Paint.Color == "red" {
					w = append(w, "red paint fades in sunlight")
				}
				if s.Spec.Teeth > 100 {
					return w, fmt.Errorf("a sprocket has at most 100 teeth, not %d", s.Spec.Teeth)
				}
				return w, nil
			},
		},
	})
	// v2.Sprocket is the hub (a Hub() method); v1.Sprocket converts to and from
	// it (ConvertTo, ConvertFrom). Every version in the scheme converts through v2.
	err = framework.AddConversion(mgr, &v2.Sprocket{})
	// README end
	return err
}

// readmeEnvtest is the README's envtest example for webhooks, between the
// markers, so that it compiles.
func readmeEnvtest(ctx context.Context, env *envtest.Environment, cfg *rest.Config, dryRunRefused func(context.Context) error) error {
	// README begin
	serving, err := env.InstallWebhooks(ctx, envtest.WebhookOptions{
		Paths:          []string{"config/webhook/manifests.yaml"},
		ConversionCRDs: []string{"sprockets.example.com"},
	})
	mgr, err := framework.NewManager(cfg, framework.Options{
		Webhook: framework.WebhookServerOptions{Addr: serving.Addr, CertDir: serving.CertDir},
	})
	// ... register the webhooks (framework.AddWebhook, AddConversion) ...
	go mgr.Start(ctx)
	// The API server picks up new configurations asynchronously: wait until it
	// calls the webhooks, e.g. with a dry-run create the validator refuses
	// (nil once the validator's message comes back).
	err = serving.Wait(ctx, dryRunRefused)
	// README end
	return err
}

var _ = readmeEnvtest // compiled, not run: it needs a control plane

// TestREADMEWebhooksExamples: the README's go blocks under "## Webhooks"
// are readmeWebhooks's and readmeEnvtest's bodies, in that order, so they
// compile; the first registers on a manager whose scheme holds both
// Sprocket versions.
func TestREADMEWebhooksExamples(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Webhooks\n")
	section, _, _ = strings.Cut(section, "\n## ")
	var blocks []string
	for rest := section; ok; {
		var block string
		if _, rest, ok = strings.Cut(rest, "```go\n"); ok {
			block, rest, _ = strings.Cut(rest, "```")
			blocks = append(blocks, block)
		}
	}
	self, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for rest, ok := string(self), true; ; {
		var body string
		if _, rest, ok = strings.Cut(rest, "\t// README begin\n"); !ok {
			break
		}
		body, rest, _ = strings.Cut(rest, "\t// README end\n")
		var lines []string
		for l := range strings.Lines(body) {
			lines = append(lines, strings.TrimPrefix(l, "\t"))
		}
		bodies = append(bodies, strings.Join(lines, ""))
	}
	if len(blocks) != 2 || len(bodies) != 2 {
		t.Fatalf("%d go blocks under the README's ## Webhooks and %d bodies here, want 2 of each", len(blocks), len(bodies))
	}
	for i, name := range []string{"readmeWebhooks", "readmeEnvtest"} {
		if blocks[i] != bodies[i] {
			t.Errorf("README's Webhooks example %d differs from %s; copy one onto the other:\n%s", i+1, name, bodies[i])
		}
	}
	mgr := testenv.NewManager(t, unreachable, framework.Options{Scheme: sprocketScheme(t)})
	if err := readmeWebhooks(mgr); err != nil {
		t.Errorf("the README's example: %v", err)
	}
}
