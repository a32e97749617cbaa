package framework

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ErrNoConfig is returned by LoadConfig when no kubeconfig is found and the
// process does not run in a cluster.
var ErrNoConfig = errors.New("framework: no Kubernetes configuration: no --kubeconfig given, no file in $KUBECONFIG or at ~/.kube/config, and not running in a cluster")

// LoadConfig returns the configuration to reach the API server, looked up in
// this order: the kubeconfig file at path (when path is not empty), the files
// in $KUBECONFIG, ~/.kube/config, and the in-cluster service account. Errors
// name the file or source that failed; ErrNoConfig means none was found.
func LoadConfig(path string) (*rest.Config, error) {
	if path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("load kubeconfig %s: %w", path, err)
		}
		return cfg, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	found := false
	for _, p := range rules.GetLoadingPrecedence() {
		if _, err := os.Stat(p); err == nil {
			found = true
			break
		}
	}
	if found {
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("load kubeconfig %v: %w", rules.GetLoadingPrecedence(), err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if errors.Is(err, rest.ErrNotInCluster) {
		return nil, ErrNoConfig
	}
	if err != nil {
		return nil, fmt.Errorf("load in-cluster config: %w", err)
	}
	return cfg, nil
}
