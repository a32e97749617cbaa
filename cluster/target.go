package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/reconcile"
)

// Target is a cluster a provider wants engaged.
type Target struct {
	// Name names the cluster in requests (reconcile.Request.Cluster), logs
	// and metrics: a DNS-1123 label, unique across the providers of one
	// manager. "" is the manager's own cluster, which only the manager
	// engages.
	Name string
	// Config is the cluster's API server configuration. It must not be
	// nil.
	Config *rest.Config
	// Namespace limits the cluster's cache to one namespace. Zero means
	// all namespaces.
	Namespace string
	// Version identifies the target's content: engaging a name again with
	// the same Version does nothing; with another, the cluster is engaged
	// anew. Zero means a hash of Config's host, credentials and TLS data.
	Version string
	// Source names where the target comes from, for errors and Health
	// ("Secret fleet-system/edge-1"). Zero means the target's name.
	Source string
	// Fence, when not nil, is asked before each write through the
	// cluster's client, after the cluster's own check and the Set's
	// Options.Fence: a manager that spreads clusters over its sharding
	// ring refuses writes to a cluster it no longer holds. It is no part
	// of Version. Zero means no fence of the target's own.
	Fence func() error
}

// describe names the target in errors: its name and source.
func (t Target) describe() string {
	switch {
	case t.Source == "" || t.Source == t.Name:
		return fmt.Sprintf("%q", t.Name)
	}
	return fmt.Sprintf("%q (from %s)", t.Name, t.Source)
}

// Validate reports what makes t unusable: a Name that is not a DNS-1123
// label, or a nil Config.
func (t Target) Validate() error {
	var errs []error
	if t.Name != "" {
		if msgs := validation.IsDNS1123Label(t.Name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("Name %q is not a DNS-1123 label: %s", t.Name, strings.Join(msgs, "; ")))
		}
	}
	if t.Config == nil {
		errs = append(errs, errors.New("Config is nil"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("cluster %s: invalid target: %w", t.describe(), errors.Join(errs...))
	}
	return nil
}

// Admit returns t as an Engager records it, its Source defaulted to its
// name, or why a provider may not engage it: the manager's own name "",
// or what Validate reports.
func Admit(t Target) (Target, error) {
	if t.Source == "" {
		t.Source = t.Name
	}
	if t.Name == "" {
		return t, fmt.Errorf("cluster: %s engages the name \"\", which is the manager's own cluster's", t.Source)
	}
	return t, t.Validate()
}

// version returns t.Version, or a hash of the parts of its Config that
// decide where and as whom it connects.
func (t Target) version() string {
	if t.Version != "" {
		return t.Version
	}
	h := sha256.New()
	c := t.Config
	for _, s := range []string{c.Host, c.APIPath, c.Username, c.Password, c.BearerToken, c.BearerTokenFile,
		c.CertFile, c.KeyFile, c.CAFile, string(c.CertData), string(c.KeyData), string(c.CAData), c.ServerName, t.Namespace} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Provider discovers clusters: Run tells e which to engage and disengage
// until ctx is done, then returns nil, or returns the error that stops it
// (which stops the manager).
//
// A Provider may also have a method Describe() string, which says which
// clusters it finds ("namespaces(labels: spread=a)"): DescribeProviders
// reports it.
type Provider interface {
	Run(ctx context.Context, e Engager) error
}

// DescribeProviders describes ps, sorted and joined with ", ": each by its
// Describe method, or else by its type. A sharding ring that spreads
// clusters records it, so that members whose providers find clusters
// differently refuse each other.
func DescribeProviders(ps []Provider) string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		if d, ok := p.(interface{ Describe() string }); ok {
			out = append(out, d.Describe())
		} else {
			out = append(out, fmt.Sprintf("%T", p))
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// ProviderFunc adapts a function to a Provider.
type ProviderFunc func(ctx context.Context, e Engager) error

var _ Provider = ProviderFunc(nil)

// Run calls f(ctx, e).
func (f ProviderFunc) Run(ctx context.Context, e Engager) error { return f(ctx, e) }

// Engager is what a provider tells of the clusters it found: the Set.
type Engager interface {
	// Engage records that t should be engaged and returns; it never waits
	// on the cluster. It fails at once for an invalid target or a name
	// another source engaged (both sources named).
	Engage(t Target) error
	// Disengage disengages the cluster named name, if any, and forgets
	// its failures.
	Disengage(name string)
	// Fail records that the cluster named name, from source, cannot be
	// engaged, and why (a kubeconfig that does not parse, say): Health
	// shows it until the name is engaged or disengaged. A cluster engaged
	// under that name stays engaged.
	Fail(name, source string, err error)
	// Local returns the manager's own cluster, for providers whose
	// inventory lives there.
	Local() *Cluster
}

// State is where a cluster is in its engagement.
type State string

const (
	// StateEngaging: connecting and probing, or waiting for a slot
	// (Options.MaxEngaging).
	StateEngaging State = "engaging"
	// StateReady: engaged; controllers bind its sources.
	StateReady State = "ready"
	// StateUnhealthy: engaged, but its last HealthOptions.FailureThreshold
	// probes failed; controllers hold its keys until a probe passes.
	StateUnhealthy State = "unhealthy"
	// StateFailed: the target cannot be engaged (Fail), or the last
	// attempt failed and the next waits for the backoff.
	StateFailed State = "failed"
	// StateDisengaged: disengaged; its client refuses writes. A Cluster
	// value held past its disengagement reports it; the Set forgets the
	// cluster, so Set.Health and the debug page no longer list it.
	StateDisengaged State = "disengaged"
)

// Health is a cluster's state as the Set last saw it.
type Health struct {
	// Cluster is the cluster's name.
	Cluster string `json:"cluster"`
	// Source is where the target came from (Target.Source).
	Source string `json:"source,omitempty"`
	// State is where the cluster is in its engagement.
	State State `json:"state"`
	// Since is when the cluster entered State.
	Since time.Time `json:"since"`
	// Err is why the last attempt failed, if it did.
	Err string `json:"error,omitempty"`
}

// Scope says which engaged clusters a controller watches and reconciles.
// The zero value is the manager's own cluster only.
type Scope struct {
	// Remote watches every cluster the providers engage too, from its
	// engagement to its disengagement, besides the manager's own: the
	// controller's sources are bound to each engaged cluster's cache, and
	// its requests name the cluster of their event. Zero (false) means the
	// manager's own cluster only.
	Remote bool

	// OnEngaged, when not nil, returns the requests to queue when a cluster
	// is engaged, once the controller's informers of it synced, and again
	// each time it turns healthy after its probes failed: ctx carries c
	// (From) and ends with its engagement. A request naming no
	// cluster is in c, one naming a cluster is in that one, as a Map
	// source's. The primary kind's initial list queues every object of
	// that kind in c already (as replays); OnEngaged is for keys c holds
	// no object of yet, such as a copy of one of the manager's own
	// cluster's objects to create in c. It must return soon. Zero means
	// none. It needs Remote.
	//
	// Nothing is queued at disengagement: c's keys are dropped and its
	// client refuses writes. A Listener (Set.Subscribe) cleans up in its
	// Disengaged, which runs before the client is fenced.
	OnEngaged func(ctx context.Context, c *Cluster) []reconcile.Request
}
