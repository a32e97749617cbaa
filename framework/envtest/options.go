package envtest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
)

// EnvUseExistingCluster is the environment variable that, set to a true value (as
// strconv.ParseBool reads it), turns on [Options.UseExistingCluster].
const EnvUseExistingCluster = "CONVERGE_USE_EXISTING_CLUSTER"

// defaultStartTimeout is what a zero [Options.StartTimeout] means.
const defaultStartTimeout = time.Minute

// Options configures an [Environment]. The zero value starts etcd and kube-apiserver from
// binaries found by [FindBinary], with no CRDs, logging to files in [Environment.Dir].
type Options struct {
	// BinaryAssetsDirectory is the folder holding etcd, kube-apiserver,
	// kube-controller-manager and kubectl. A binary it lacks is looked up in the next
	// places of [SearchPath]. Zero means only those other places are searched.
	BinaryAssetsDirectory string

	// UseExistingCluster uses the cluster of the current kubeconfig (the KUBECONFIG
	// variable, else ~/.kube/config) instead of starting a control plane. Setting
	// $CONVERGE_USE_EXISTING_CLUSTER to true turns it on as well. Of the other fields
	// only CRDs and StartTimeout then apply; setting one of the fields that configure
	// local processes (BinaryAssetsDirectory, ControllerManager, APIServerFlags,
	// EtcdFlags, Output) makes Start fail, naming it. Zero means a local control plane
	// is started.
	UseExistingCluster bool

	// ControllerManager also starts kube-controller-manager, running the garbage
	// collector, the namespace controller and the TTL-after-finished controller, so owned
	// objects are deleted with their owner, deleted namespaces are emptied and go away, and
	// a finished Job is deleted once its ttlSecondsAfterFinished has passed (no controller
	// runs Jobs: a Job finishes when its status says so). Zero means it is not started.
	ControllerManager bool

	// CRDs are installed by Start, which returns once they are established and
	// discoverable. Zero means none.
	CRDs CRDOptions

	// APIServerFlags are extra "--name=value" flags for kube-apiserver. A flag whose name
	// the Environment already sets replaces the Environment's value(s); others are
	// appended. Zero means the Environment's flags only.
	APIServerFlags []string

	// EtcdFlags are extra "--name=value" flags for etcd, merged as APIServerFlags are.
	// Zero means the Environment's flags only.
	EtcdFlags []string

	// StartTimeout bounds Start, StartAPIServer and InstallCRDs, on top of their
	// context. Zero means one minute.
	StartTimeout time.Duration

	// Output receives the standard output and error of every process, each line prefixed
	// with the process name; writes to it are serialized. Zero means each process writes
	// to its own log file in [Environment.Dir] (etcd.log, kube-apiserver.log,
	// kube-controller-manager.log), which Stop removes with the folder. Either way, the
	// error of a process that fails to start includes the tail of its output.
	Output io.Writer
}

// CRDOptions lists CustomResourceDefinitions (apiextensions.k8s.io/v1) to install.
type CRDOptions struct {
	// Paths are YAML or JSON files, or folders whose *.yaml, *.yml and *.json files (not
	// recursive, in name order) are read. A file may hold several documents separated by
	// "---"; empty documents are skipped and any other kind is an error. Zero means none.
	Paths []string

	// Objects are CRDs given as *unstructured.Unstructured or as any typed object that
	// runtime.DefaultUnstructuredConverter can convert (such as apiextensions/v1's
	// CustomResourceDefinition). An empty apiVersion and kind are taken to be
	// apiextensions.k8s.io/v1 CustomResourceDefinition. Zero means none.
	Objects []runtime.Object
}

// isZero reports whether c lists no CRD.
func (c CRDOptions) isZero() bool { return len(c.Paths) == 0 && len(c.Objects) == 0 }

// validate reports the first broken rule of c.
func (c CRDOptions) validate() error {
	for i, p := range c.Paths {
		if p == "" {
			return fmt.Errorf("CRDs.Paths[%d] is empty", i)
		}
	}
	for i, o := range c.Objects {
		if o == nil {
			return fmt.Errorf("CRDs.Objects[%d] is nil", i)
		}
	}
	return nil
}

// withDefaults returns o with every zero field that has a non-zero default filled in.
func (o Options) withDefaults() Options {
	if o.StartTimeout == 0 {
		o.StartTimeout = defaultStartTimeout
	}
	if v, err := strconv.ParseBool(os.Getenv(EnvUseExistingCluster)); err == nil && v {
		o.UseExistingCluster = true
	}
	return o
}

// validate reports every broken rule of o, one error each.
func (o Options) validate() error {
	var errs []error
	if o.StartTimeout < 0 {
		errs = append(errs, fmt.Errorf("StartTimeout %v is negative", o.StartTimeout))
	}
	if v := os.Getenv(EnvUseExistingCluster); v != "" {
		if _, err := strconv.ParseBool(v); err != nil {
			errs = append(errs, fmt.Errorf("$%s=%q is not a boolean", EnvUseExistingCluster, v))
		}
	}
	if err := validateFlags("APIServerFlags", o.APIServerFlags); err != nil {
		errs = append(errs, err)
	}
	if err := validateFlags("EtcdFlags", o.EtcdFlags); err != nil {
		errs = append(errs, err)
	}
	if err := o.CRDs.validate(); err != nil {
		errs = append(errs, err)
	}
	if o.UseExistingCluster {
		errs = append(errs, o.localOnly()...)
	}
	return errors.Join(errs...)
}

// localOnly names each field set that configures the processes of a local control
// plane, which an existing cluster does not start.
func (o Options) localOnly() []error {
	var errs []error
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"BinaryAssetsDirectory", o.BinaryAssetsDirectory != ""},
		{"ControllerManager", o.ControllerManager},
		{"APIServerFlags", len(o.APIServerFlags) > 0},
		{"EtcdFlags", len(o.EtcdFlags) > 0},
		{"Output", o.Output != nil},
	} {
		if f.set {
			errs = append(errs, fmt.Errorf("%s configures a local control plane, and UseExistingCluster (or $%s) starts none: leave it zero with an existing cluster",
				f.name, EnvUseExistingCluster))
		}
	}
	return errs
}

// validateFlags checks that every flag is spelled "--name" or "--name=value".
func validateFlags(field string, flags []string) error {
	for i, f := range flags {
		if name, _ := flagName(f); name == "" {
			return fmt.Errorf("%s[%d] %q is not of the form --name=value", field, i, f)
		}
	}
	return nil
}

// flagName returns the name of a "--name=value" or "--name" flag, and its value; name is
// empty when f has another shape.
func flagName(f string) (name, value string) {
	rest, ok := strings.CutPrefix(f, "--")
	if !ok {
		return "", ""
	}
	name, value, _ = strings.Cut(rest, "=")
	if name == "" || strings.HasPrefix(name, "-") {
		return "", ""
	}
	return name, value
}

// mergeFlags returns defaults with overrides applied: an override whose name appears in
// defaults replaces every default of that name (at the place of the first one); other
// overrides are appended in order. Both lists hold well-formed flags.
func mergeFlags(defaults, overrides []string) []string {
	overridden := map[string][]string{}
	var order []string
	for _, f := range overrides {
		name, _ := flagName(f)
		if _, seen := overridden[name]; !seen {
			order = append(order, name)
		}
		overridden[name] = append(overridden[name], f)
	}
	out := make([]string, 0, len(defaults)+len(overrides))
	placed := map[string]bool{}
	for _, f := range defaults {
		name, _ := flagName(f)
		repl, ok := overridden[name]
		if !ok {
			out = append(out, f)
			continue
		}
		if !placed[name] {
			out = append(out, repl...)
			placed[name] = true
		}
	}
	for _, name := range order {
		if !placed[name] {
			out = append(out, overridden[name]...)
		}
	}
	return out
}
