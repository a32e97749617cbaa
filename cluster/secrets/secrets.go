package secrets

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/informers"
)

// DefaultLabel is the label, with the value "true", that selects the
// Secrets of a Provider whose Options.Labels is zero.
const DefaultLabel = "converge.dev/cluster"

// Options configures a Provider.
type Options struct {
	// Namespace is the namespace of the manager's own cluster whose
	// Secrets are read. It is required.
	Namespace string
	// Labels selects the Secrets. Zero means converge.dev/cluster=true.
	Labels labels.Selector
	// Key is the key of the Secret's data holding the kubeconfig. Zero
	// means "kubeconfig".
	Key string
	// NameFrom names the cluster of a Secret. Zero means the Secret's name.
	NameFrom func(*corev1.Secret) string
	// AllowExec accepts kubeconfigs whose users run a command (exec) or an
	// auth-provider plugin. Zero (false) refuses them.
	AllowExec bool
	// AllowFiles accepts kubeconfigs that read files of the manager's
	// filesystem (tokenFile, client-certificate, client-key,
	// certificate-authority). Zero (false) refuses them.
	AllowFiles bool
}

func (o Options) withDefaults() Options {
	if o.Labels == nil {
		o.Labels = labels.SelectorFromSet(labels.Set{DefaultLabel: "true"})
	}
	if o.Key == "" {
		o.Key = "kubeconfig"
	}
	if o.NameFrom == nil {
		o.NameFrom = func(s *corev1.Secret) string { return s.Name }
	}
	return o
}

func (o Options) validate() error {
	if o.Namespace == "" {
		return errors.New("secrets: Options.Namespace is required")
	}
	return nil
}

// Provider engages the clusters of the kubeconfig Secrets its Options
// select (see the package documentation).
type Provider struct {
	opts Options
}

var _ cluster.Provider = (*Provider)(nil)

// New returns a Provider of the Secrets opts select.
func New(opts Options) (*Provider, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &Provider{opts: opts}, nil
}

// Describe says which Secrets p reads and what it accepts of them:
// "secrets(namespace: fleet, labels: converge.dev/cluster=true, key:
// kubeconfig, exec: false, files: false)". A NameFrom function is not
// described.
func (p *Provider) Describe() string {
	return fmt.Sprintf("secrets(namespace: %s, labels: %s, key: %s, exec: %t, files: %t)", p.opts.Namespace, p.opts.Labels, p.opts.Key, p.opts.AllowExec, p.opts.AllowFiles)
}

// Run watches the selected Secrets in e's local cluster and engages and
// disengages their clusters until ctx is done.
func (p *Provider) Run(ctx context.Context, e cluster.Engager) error {
	inf, err := informers.For[*corev1.Secret](e.Local().Cache(), informers.Selection{Namespace: p.opts.Namespace, Labels: p.opts.Labels})
	if err != nil {
		return fmt.Errorf("secrets: watch Secrets in %s: %w", p.opts.Namespace, err)
	}
	reg, err := inf.AddListener(informers.ListenerFuncs[*corev1.Secret]{
		AddFunc: func(s *corev1.Secret, _ bool) { p.engage(e, s) },
		UpdateFunc: func(old, s *corev1.Secret) {
			if p.opts.NameFrom(old) != p.opts.NameFrom(s) {
				e.Disengage(p.opts.NameFrom(old))
			}
			p.engage(e, s)
		},
		DeleteFunc: func(s *corev1.Secret, _ bool) { e.Disengage(p.opts.NameFrom(s)) },
	}, cache.HandlerOptions{})
	if err != nil {
		return fmt.Errorf("secrets: watch Secrets in %s: %w", p.opts.Namespace, err)
	}
	<-ctx.Done()
	_ = inf.RemoveListener(reg)
	return nil
}

// engage engages the cluster of s, or reports why it cannot.
func (p *Provider) engage(e cluster.Engager, s *corev1.Secret) {
	name, source := p.opts.NameFrom(s), "Secret "+s.Namespace+"/"+s.Name
	cfg, err := p.Config(s)
	if err != nil {
		e.Fail(name, source, err)
		return
	}
	sum := sha256.Sum256(s.Data[p.opts.Key])
	if err := e.Engage(cluster.Target{Name: name, Config: cfg, Version: hex.EncodeToString(sum[:]), Source: source}); err != nil {
		e.Fail(name, source, err)
	}
}

// Config returns the rest.Config of the kubeconfig s holds, or an error
// naming s, the field and the cause: a missing key, a kubeconfig that does
// not parse or names no current context, or one the Options refuse.
func (p *Provider) Config(s *corev1.Secret) (*rest.Config, error) {
	where := fmt.Sprintf("Secret %s/%s: data.%s", s.Namespace, s.Name, p.opts.Key)
	data, ok := s.Data[p.opts.Key]
	if !ok || len(data) == 0 {
		return nil, fmt.Errorf("%s: missing or empty", where)
	}
	kc, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("%s: not a kubeconfig: %w", where, err)
	}
	if err := p.check(kc); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*kc, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return cfg, nil
}

// check reports the parts of kc the Options refuse, each by its field.
func (p *Provider) check(kc *clientcmdapi.Config) error {
	var refused []string
	for _, name := range sortedKeys(kc.AuthInfos) {
		u := kc.AuthInfos[name]
		if !p.opts.AllowFiles {
			for field, file := range map[string]string{"tokenFile": u.TokenFile, "client-certificate": u.ClientCertificate, "client-key": u.ClientKey} {
				if file != "" {
					refused = append(refused, fmt.Sprintf("users[%s].%s names a local file (%s)", name, field, file))
				}
			}
		}
		if !p.opts.AllowExec {
			if u.Exec != nil {
				refused = append(refused, fmt.Sprintf("users[%s].exec runs a command (%s)", name, u.Exec.Command))
			}
			if u.AuthProvider != nil {
				refused = append(refused, fmt.Sprintf("users[%s].auth-provider calls a plugin (%s)", name, u.AuthProvider.Name))
			}
		}
	}
	for _, name := range sortedKeys(kc.Clusters) {
		if c := kc.Clusters[name]; !p.opts.AllowFiles && c.CertificateAuthority != "" {
			refused = append(refused, fmt.Sprintf("clusters[%s].certificate-authority names a local file (%s)", name, c.CertificateAuthority))
		}
	}
	if len(refused) == 0 {
		return nil
	}
	sort.Strings(refused)
	return fmt.Errorf("refused: %s (see secrets.Options.AllowFiles and AllowExec)", strings.Join(refused, "; "))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
