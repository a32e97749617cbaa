package envtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"k8s.io/client-go/rest"
)

// Lifecycle errors.
var (
	// ErrNotStarted is returned by methods that need a started Environment.
	ErrNotStarted = errors.New("envtest: environment not started")
	// ErrStopped is returned by Start and the other methods after Stop.
	ErrStopped = errors.New("envtest: environment stopped")
	// ErrAlreadyStarted is returned by a second Start.
	ErrAlreadyStarted = errors.New("envtest: environment already started")
	// ErrNotLocal is returned by the methods that act on the processes of a local
	// control plane (StopAPIServer, CompactEtcd, …) when the Environment uses an existing
	// cluster.
	ErrNotLocal = errors.New("envtest: not a local control plane (Options.UseExistingCluster)")
)

// state is where an Environment is in its life: new → started → stopped. A failed Start
// leaves it new, so Start may be tried again.
type state int

const (
	stateNew state = iota
	stateStarted
	stateStopped
)

// Environment is a Kubernetes control plane for tests: local processes, or an existing
// cluster with [Options.UseExistingCluster]. Make one with [New], then call Start once
// and Stop once done (Stop is idempotent and may be deferred even when Start failed).
//
// All methods are safe for concurrent use. Start, Stop, InstallCRDs and the fault
// injection methods (StopAPIServer, StartAPIServer, RestartAPIServer, KillAPIServer,
// CompactEtcd) run one at a time; the accessors (Config, KubeconfigPath, APIServerURL,
// EtcdURL, Dir) and AddUser do not wait for them.
type Environment struct {
	opts    Options // with defaults; immutable
	optsErr error   // from opts.validate(); returned by Start

	// lifecycle serializes Start, Stop, InstallCRDs and the fault injection methods. It
	// guards local's processes and is taken before mu, never after.
	lifecycle sync.Mutex

	mu             sync.Mutex
	state          state        // mu guards state
	dir            string       // mu guards dir; the temporary folder, removed by Stop
	cfg            *rest.Config // mu guards cfg; admin, never handed out (copied)
	kubeconfigPath string       // mu guards kubeconfigPath
	etcdURL        string       // mu guards etcdURL
	local          *localPlane  // mu guards the pointer; nil when using an existing cluster
}

// New returns an Environment configured by opts; it starts nothing. Invalid options are
// reported by Start.
func New(opts Options) *Environment {
	opts = opts.withDefaults()
	return &Environment{opts: opts, optsErr: opts.validate()}
}

// Start starts the control plane (or connects to the existing cluster), installs
// Options.CRDs and returns an admin config; see the package documentation for what
// "ready" guarantees. ctx and Options.StartTimeout bound the start-up only: the processes
// live until Stop. On failure everything started is stopped and removed again, and the
// error carries the tail of the failing process's output; a missing binary is a
// [*MissingBinaryError].
func (e *Environment) Start(ctx context.Context) (*rest.Config, error) {
	e.lifecycle.Lock()
	defer e.lifecycle.Unlock()
	e.mu.Lock()
	st := e.state
	e.mu.Unlock()
	switch {
	case st == stateStarted:
		return nil, ErrAlreadyStarted
	case st == stateStopped:
		return nil, ErrStopped
	case e.optsErr != nil:
		return nil, fmt.Errorf("envtest: invalid Options: %w", e.optsErr)
	}

	ctx, cancel := context.WithTimeout(ctx, e.opts.StartTimeout)
	defer cancel()
	var err error
	if e.opts.UseExistingCluster {
		err = e.startExisting(ctx)
	} else {
		err = e.startLocal(ctx)
	}
	if err == nil && e.opts.UseExistingCluster && !e.opts.CRDs.isZero() {
		err = e.installCRDs(ctx, e.opts.CRDs) // startLocal installs them itself
	}
	if err != nil {
		cleanupErr := e.teardown()
		return nil, errors.Join(fmt.Errorf("envtest: start: %w", err), cleanupErr)
	}
	e.mu.Lock()
	e.state = stateStarted
	cfg := rest.CopyConfig(e.cfg)
	e.mu.Unlock()
	return cfg, nil
}

// Stop stops every process (SIGTERM, then SIGKILL after a few seconds) and removes the
// temporary folder, logs included. It is idempotent; after it, Start returns ErrStopped.
func (e *Environment) Stop() error {
	e.lifecycle.Lock()
	defer e.lifecycle.Unlock()
	e.mu.Lock()
	st := e.state
	e.state = stateStopped
	e.mu.Unlock()
	if st == stateStopped {
		return nil
	}
	if err := e.teardown(); err != nil {
		return fmt.Errorf("envtest: stop: %w", err)
	}
	return nil
}

// teardown stops the processes and removes the folder; the caller holds lifecycle.
func (e *Environment) teardown() error {
	e.mu.Lock()
	local, dir := e.local, e.dir
	e.local, e.dir, e.cfg, e.kubeconfigPath, e.etcdURL = nil, "", nil, "", ""
	e.mu.Unlock()
	var errs []error
	if local != nil {
		errs = append(errs, local.stopAll())
	}
	if dir != "" {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// started returns the state's error for methods that need a started Environment.
func (e *Environment) started() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch e.state {
	case stateNew:
		return ErrNotStarted
	case stateStopped:
		return ErrStopped
	}
	return nil
}

// localStarted returns the local control plane, or the reason there is none.
func (e *Environment) localStarted() (*localPlane, error) {
	if err := e.started(); err != nil {
		return nil, err
	}
	if e.opts.UseExistingCluster {
		return nil, ErrNotLocal
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.local, nil
}

// Config returns a copy of the admin config (user converge-admin in group system:masters,
// QPS 1000 and burst 2000 for a local control plane), or nil before Start and after Stop.
func (e *Environment) Config() *rest.Config {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cfg == nil {
		return nil
	}
	return rest.CopyConfig(e.cfg)
}

// KubeconfigPath returns the admin kubeconfig file written by Start in Dir (for an
// existing cluster, a self-contained copy of the current context), for tools such as
// kubectl; "" before Start and after Stop.
func (e *Environment) KubeconfigPath() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.kubeconfigPath
}

// APIServerURL returns kube-apiserver's URL, such as https://127.0.0.1:38421; "" before
// Start and after Stop.
func (e *Environment) APIServerURL() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cfg == nil {
		return ""
	}
	return e.cfg.Host
}

// EtcdURL returns etcd's client URL, such as http://127.0.0.1:38422 (plain HTTP, on the
// loopback interface); "" before Start, after Stop and for an existing cluster.
func (e *Environment) EtcdURL() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.etcdURL
}

// Dir returns the Environment's temporary folder (etcd data, certificates, logs,
// kubeconfig), which Stop removes; "" before Start and after Stop.
func (e *Environment) Dir() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.dir
}
