// Package namespaces is a cluster provider that makes each selected
// namespace of the manager's own cluster a cluster of its own, named after
// the namespace, whose cache holds only that namespace's objects. It
// serves tests and demos of controllers of many clusters on one control
// plane; the namespaces share the manager's credentials and API server, so
// a cluster's client writes wherever those credentials allow: a write to
// another namespace is not refused, and lands there.
//
// Guarantees: a namespace selected is engaged; one deleted, or no longer
// selected, is disengaged.
package namespaces

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/informers"
)

// Options configures a Provider.
type Options struct {
	// Labels selects the namespaces. Zero means every namespace.
	Labels labels.Selector
}

// Provider engages a cluster per namespace its Options select.
type Provider struct {
	opts Options
}

var _ cluster.Provider = (*Provider)(nil)

// New returns a Provider of the namespaces opts select.
func New(opts Options) *Provider { return &Provider{opts: opts} }

// Describe says which namespaces p engages: "namespaces(labels: a=b)",
// "namespaces(all)".
func (p *Provider) Describe() string {
	if p.opts.Labels == nil || p.opts.Labels.Empty() {
		return "namespaces(all)"
	}
	return "namespaces(labels: " + p.opts.Labels.String() + ")"
}

// Run watches the selected namespaces of e's local cluster and engages and
// disengages their clusters until ctx is done.
func (p *Provider) Run(ctx context.Context, e cluster.Engager) error {
	local := e.Local()
	inf, err := informers.For[*corev1.Namespace](local.Cache(), informers.Selection{Labels: p.opts.Labels})
	if err != nil {
		return fmt.Errorf("namespaces: watch namespaces: %w", err)
	}
	engage := func(ns *corev1.Namespace) {
		if ns.DeletionTimestamp != nil {
			e.Disengage(ns.Name)
			return
		}
		t := cluster.Target{Name: ns.Name, Config: local.Config(), Namespace: ns.Name, Version: string(ns.UID), Source: "Namespace " + ns.Name}
		if err := e.Engage(t); err != nil {
			e.Fail(ns.Name, t.Source, err)
		}
	}
	reg, err := inf.AddListener(informers.ListenerFuncs[*corev1.Namespace]{
		AddFunc:    func(ns *corev1.Namespace, _ bool) { engage(ns) },
		UpdateFunc: func(_, ns *corev1.Namespace) { engage(ns) },
		DeleteFunc: func(ns *corev1.Namespace, _ bool) { e.Disengage(ns.Name) },
	}, cache.HandlerOptions{})
	if err != nil {
		return fmt.Errorf("namespaces: watch namespaces: %w", err)
	}
	<-ctx.Done()
	_ = inf.RemoveListener(reg)
	return nil
}
