package framework_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/webhook"
	v2 "github.com/converge-dev/converge/internal/testapi"
)

// readmeWebhooks is the README's Webhooks example, between the markers, so
// that it compiles and runs; testapi.Sprocket is a v2 Sprocket, the hub.
func readmeWebhooks(mgr *framework.Manager) error {
	// README begin
	// Teeth default to 12; more than 100 are refused; red paint earns a warning.
	err := framework.NewWebhook(mgr, framework.WebhookOptions[*v2.Sprocket]{
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
	err = framework.NewConversion[*v2.Sprocket](mgr)
	// README end
	return err
}

// TestREADMEWebhooksExample: the README's first Webhooks example is
// readmeWebhooks's body, and it registers on a manager whose scheme holds
// both Sprocket versions.
func TestREADMEWebhooksExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Webhooks\n")
	_, block, ok2 := strings.Cut(section, "```go\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README has no go block under ## Webhooks")
	}
	self, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(self), "\t// README begin\n")
	body, _, _ = strings.Cut(body, "\t// README end\n")
	var lines []string
	for l := range strings.Lines(body) {
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	if got := strings.Join(lines, ""); got != block {
		t.Errorf("README's Webhooks example differs from readmeWebhooks; copy one onto the other:\n%s", got)
	}
	mgr := newManager(t, unreachable, framework.Options{Scheme: sprocketScheme(t)})
	if err := readmeWebhooks(mgr); err != nil {
		t.Errorf("the README's example: %v", err)
	}
}
