package envtest_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/converge-dev/converge/framework/envtest"
)

func TestStartRejectsInvalidOptions(t *testing.T) {
	tests := []struct {
		name string
		opts envtest.Options
		env  string // $CONVERGE_USE_EXISTING_CLUSTER
		want string
	}{
		{name: "negative StartTimeout", opts: envtest.Options{StartTimeout: -time.Second}, want: "StartTimeout -1s is negative"},
		{name: "flag without dashes", opts: envtest.Options{APIServerFlags: []string{"v=4"}}, want: `APIServerFlags[0] "v=4" is not of the form --name=value`},
		{name: "flag with three dashes", opts: envtest.Options{EtcdFlags: []string{"--log-level=warn", "---x"}}, want: `EtcdFlags[1] "---x"`},
		{name: "empty CRD path", opts: envtest.Options{CRDs: envtest.CRDOptions{Paths: []string{""}}}, want: "CRDs.Paths[0] is empty"},
		{name: "nil CRD object", opts: envtest.Options{CRDs: envtest.CRDOptions{Objects: []runtime.Object{nil}}}, want: "CRDs.Objects[0] is nil"},
		{name: "existing-cluster variable not a boolean", env: "maybe", want: `$CONVERGE_USE_EXISTING_CLUSTER="maybe" is not a boolean`},
		// An existing cluster starts no process: the fields that configure them are refused.
		{name: "existing cluster with BinaryAssetsDirectory", opts: envtest.Options{UseExistingCluster: true, BinaryAssetsDirectory: "/bin"}, want: "BinaryAssetsDirectory configures a local control plane"},
		{name: "existing cluster with ControllerManager", opts: envtest.Options{UseExistingCluster: true, ControllerManager: true}, want: "ControllerManager configures a local control plane"},
		{name: "existing cluster with APIServerFlags", opts: envtest.Options{UseExistingCluster: true, APIServerFlags: []string{"--v=4"}}, want: "APIServerFlags configures a local control plane"},
		{name: "existing cluster with EtcdFlags", opts: envtest.Options{UseExistingCluster: true, EtcdFlags: []string{"--log-level=warn"}}, want: "EtcdFlags configures a local control plane"},
		{name: "existing cluster with Output", opts: envtest.Options{UseExistingCluster: true, Output: io.Discard}, want: "Output configures a local control plane"},
		{name: "existing cluster by the variable, with APIServerFlags", env: "true", opts: envtest.Options{APIServerFlags: []string{"--v=4"}}, want: "APIServerFlags configures a local control plane, and UseExistingCluster (or $CONVERGE_USE_EXISTING_CLUSTER)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(envtest.EnvUseExistingCluster, tc.env)
			env := envtest.New(tc.opts)
			_, err := env.Start(t.Context())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start error = %v, want one containing %q", err, tc.want)
			}
			if err := env.Stop(); err != nil {
				t.Errorf("Stop: %v", err)
			}
		})
	}
}

func TestLifecycleErrors(t *testing.T) {
	env := envtest.New(envtest.Options{})
	if env.Config() != nil || env.Dir() != "" || env.KubeconfigPath() != "" || env.APIServerURL() != "" || env.EtcdURL() != "" {
		t.Error("accessors of a new Environment are not empty")
	}
	ctx := t.Context()
	for name, err := range map[string]error{
		"AddUser":        func() error { _, err := env.AddUser(envtest.User{Name: "u"}); return err }(),
		"InstallCRDs":    env.InstallCRDs(ctx, envtest.CRDOptions{}),
		"StopAPIServer":  env.StopAPIServer(ctx),
		"StartAPIServer": env.StartAPIServer(ctx),
		"KillAPIServer":  env.KillAPIServer(),
		"CompactEtcd":    func() error { _, err := env.CompactEtcd(ctx); return err }(),
	} {
		if !errors.Is(err, envtest.ErrNotStarted) {
			t.Errorf("%s before Start = %v, want ErrNotStarted", name, err)
		}
	}
	for range 2 {
		if err := env.Stop(); err != nil {
			t.Errorf("Stop before Start = %v, want nil", err)
		}
	}
	if _, err := env.Start(ctx); !errors.Is(err, envtest.ErrStopped) {
		t.Errorf("Start after Stop = %v, want ErrStopped", err)
	}
}
