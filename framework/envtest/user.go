package envtest

import (
	"errors"
	"fmt"
	"slices"

	"k8s.io/client-go/rest"
)

// User is an identity for [Environment.AddUser].
type User struct {
	// Name is the user name that RBAC subjects of kind User match. It must not be empty.
	Name string
	// Groups are the groups that RBAC subjects of kind Group match, besides
	// system:authenticated, which every authenticated user has.
	Groups []string
}

// AddUser returns a config that authenticates as u. For a local control plane that is a
// client certificate (CN Name, O Groups) signed by the Environment's CA, valid for every
// restart; for an existing cluster it is the current kubeconfig's identity impersonating
// u, which that identity must be allowed to do. The user has no permission beyond
// what RBAC grants it; see the Example. It makes no request.
func (e *Environment) AddUser(u User) (*rest.Config, error) {
	if u.Name == "" {
		return nil, errors.New("envtest: add user: User.Name is empty")
	}
	if err := e.started(); err != nil {
		return nil, err
	}
	e.mu.Lock()
	lp, admin := e.local, e.cfg
	e.mu.Unlock()
	if lp == nil { // an existing cluster
		cfg := rest.CopyConfig(admin)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: u.Name, Groups: slices.Clone(u.Groups)}
		return cfg, nil
	}
	kp, err := lp.ca.client(u.Name, u.Groups)
	if err != nil {
		return nil, fmt.Errorf("envtest: add user %q: %w", u.Name, err)
	}
	return lp.userConfig(kp), nil
}
