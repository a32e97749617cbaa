package envtest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// DefaultKubernetesVersion is the Kubernetes version whose binaries the cache folder of
// [SearchPath] holds; hack/control-plane.sh builds the same one.
const DefaultKubernetesVersion = "v1.37.2"

// Names of the binaries [FindBinary] looks up.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	Kubectl               = "kubectl"
)

// Environment variables naming a folder of binaries, in the order [SearchPath] reads them.
const (
	EnvConvergeAssets    = "CONVERGE_ASSETS"
	EnvKubebuilderAssets = "KUBEBUILDER_ASSETS"
)

// ErrBinaryNotFound is matched (with errors.Is) by every [*MissingBinaryError].
var ErrBinaryNotFound = errors.New("control-plane binary not found")

// AssetsDir is one place [FindBinary] looks in.
type AssetsDir struct {
	// Source says where Dir comes from, such as "$CONVERGE_ASSETS".
	Source string
	// Dir is the folder; empty when Source is unset.
	Dir string
}

// String renders d as "source=dir", or "source (unset)" when Dir is empty.
func (d AssetsDir) String() string {
	if d.Dir == "" {
		return d.Source + " (unset)"
	}
	return d.Source + "=" + d.Dir
}

// SearchPath returns the places [FindBinary] looks in, first to last:
//
//  1. explicit (Options.BinaryAssetsDirectory),
//  2. $CONVERGE_ASSETS,
//  3. $KUBEBUILDER_ASSETS,
//  4. ${XDG_CACHE_HOME:-$HOME/.cache}/converge/k8s/[DefaultKubernetesVersion], the folder
//     hack/control-plane.sh fills.
//
// Every place is listed, unset ones with an empty Dir, so that errors can name them.
func SearchPath(explicit string) []AssetsDir {
	return []AssetsDir{
		{Source: "Options.BinaryAssetsDirectory", Dir: explicit},
		{Source: "$" + EnvConvergeAssets, Dir: os.Getenv(EnvConvergeAssets)},
		{Source: "$" + EnvKubebuilderAssets, Dir: os.Getenv(EnvKubebuilderAssets)},
		cacheDir(),
	}
}

// cacheDir is the cache folder of hack/control-plane.sh, with the same rule:
// ${XDG_CACHE_HOME:-$HOME/.cache}/converge/k8s/<version>.
func cacheDir() AssetsDir {
	const suffix = "converge/k8s/" + DefaultKubernetesVersion
	if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
		return AssetsDir{Source: "cache folder $XDG_CACHE_HOME/" + suffix, Dir: filepath.Join(x, suffix)}
	}
	if h := os.Getenv("HOME"); h != "" {
		return AssetsDir{Source: "cache folder $HOME/.cache/" + suffix, Dir: filepath.Join(h, ".cache", suffix)}
	}
	return AssetsDir{Source: "cache folder ${XDG_CACHE_HOME:-$HOME/.cache}/" + suffix + " ($HOME unset too)"}
}

// FindBinary returns the path of the binary called name (such as [KubeAPIServer]) in the
// first place of [SearchPath](explicit) holding an executable file of that name; each
// binary is looked up on its own, so one folder may supply etcd and another
// kube-apiserver. When no place has it, the error is a [*MissingBinaryError].
func FindBinary(name, explicit string) (string, error) {
	places := SearchPath(explicit)
	misses := make([]string, 0, len(places))
	for _, p := range places {
		if p.Dir == "" {
			misses = append(misses, p.String())
			continue
		}
		path := filepath.Join(p.Dir, name)
		why := checkExecutable(path)
		if why == "" {
			if abs, err := filepath.Abs(path); err == nil {
				path = abs
			}
			return path, nil
		}
		misses = append(misses, fmt.Sprintf("%s: %s %s", p, path, why))
	}
	return "", &MissingBinaryError{Name: name, Searched: misses}
}

// checkExecutable returns why path is not an executable file, or "" when it is.
func checkExecutable(path string) string {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "does not exist"
	case err != nil:
		return err.Error()
	case fi.IsDir():
		return "is a folder"
	case fi.Mode().Perm()&0o111 == 0:
		return "is not executable"
	}
	return ""
}

// MissingBinaryError reports a binary that no place of [SearchPath] holds. It matches
// [ErrBinaryNotFound].
type MissingBinaryError struct {
	// Name is the binary, such as "kube-apiserver".
	Name string
	// Searched describes every place looked, in order, and why it did not do.
	Searched []string
}

// Error names the binary, every place looked and how to build the binaries.
func (e *MissingBinaryError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s not found; looked in:", e.Name)
	for _, s := range e.Searched {
		b.WriteString("\n\t")
		b.WriteString(s)
	}
	b.WriteString("\nbuild the control-plane binaries with `make assets` in the converge repository " +
		"(or run hack/control-plane.sh there), or point $" + EnvConvergeAssets +
		" or Options.BinaryAssetsDirectory at a folder holding them")
	return b.String()
}

// Is reports whether target is [ErrBinaryNotFound].
func (e *MissingBinaryError) Is(target error) bool { return target == ErrBinaryNotFound }
