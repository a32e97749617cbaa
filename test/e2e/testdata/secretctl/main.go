// Command secretctl is a test program for the e2e suite's "no secrets in
// logs" spec: a controller that handles Secret data the way real ones do. For
// each Secret of one namespace (except its own copies) it server-side applies
// a copy named <name>-copy holding the same data, marks the original with an
// annotation, and records an Event. It takes framework.Flags (run it with
// -v=10 for every log line converge has) plus --namespace.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/reconcile"
)

const (
	copyLabel        = "e2e.converge.dev/copy"
	copiedAnnotation = "e2e.converge.dev/copied"
	fieldManager     = "secretctl"
)

func main() {
	flags := framework.Flags{LeaderElectionID: "secretctl"}
	flags.Register(nil)
	namespace := flag.String("namespace", "", "namespace whose Secrets are copied")
	flag.Parse()
	if err := run(framework.SignalContext(context.Background()), &flags, *namespace); err != nil {
		fmt.Fprintln(os.Stderr, "secretctl:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, flags *framework.Flags, namespace string) error {
	opts, err := flags.Options()
	if err != nil {
		return err
	}
	opts.Cache.Namespace = namespace
	cfg, err := flags.Config()
	if err != nil {
		return err
	}
	mgr, err := framework.NewManager(cfg, opts)
	if err != nil {
		return err
	}
	events := mgr.EventRecorder("secretctl")
	c := mgr.Client()
	err = framework.NewBuilder[*corev1.Secret](mgr, "secretctl", framework.ControllerOptions{}).
		Complete(reconcile.ObjectFunc[*corev1.Secret](func(ctx context.Context, s *corev1.Secret) (reconcile.Result, error) {
			if s.Labels[copyLabel] == "true" {
				return reconcile.Result{}, nil
			}
			cp := &corev1.Secret{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
				ObjectMeta: metav1.ObjectMeta{
					Namespace: s.Namespace, Name: s.Name + "-copy",
					Labels: map[string]string{copyLabel: "true"},
					OwnerReferences: []metav1.OwnerReference{{
						APIVersion: "v1", Kind: "Secret", Name: s.Name, UID: s.UID, Controller: new(true),
					}},
				},
				Data: s.Data,
				Type: s.Type,
			}
			if _, err := c.Apply(ctx, cp, client.FieldManager(fieldManager), client.ForceOwnership()); err != nil {
				return reconcile.Result{}, fmt.Errorf("copy %s/%s: %w", s.Namespace, s.Name, err)
			}
			// Patch a stub: the cached object is shared and must not change.
			stub := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name}}
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, copiedAnnotation)
			if err := c.Patch(ctx, stub, types.MergePatchType, []byte(patch), client.FieldManager(fieldManager)); err != nil {
				return reconcile.Result{}, fmt.Errorf("mark %s/%s: %w", s.Namespace, s.Name, err)
			}
			events.Eventf(s, nil, corev1.EventTypeNormal, "Copied", "Copy", "copied %d keys to %s", len(s.Data), cp.Name)
			logr.FromContextOrDiscard(ctx).V(1).Info("copied secret", "keys", len(s.Data), "copy", cp.Name)
			return reconcile.Result{}, nil
		}))
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
