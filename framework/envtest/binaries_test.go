package envtest_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/converge-dev/converge/framework/envtest"
)

// assetDirs are the folders of one discovery case: the explicit folder, $CONVERGE_ASSETS,
// $KUBEBUILDER_ASSETS and the cache folder under $XDG_CACHE_HOME.
type assetDirs struct {
	explicit, converge, kubebuilder, cache string
}

// setupAssets makes the four folders, puts an executable file for each binary named in
// has into them, and points the environment variables at them ("" leaves a variable
// unset). The cache folder follows hack/control-plane.sh's layout under $XDG_CACHE_HOME.
func setupAssets(t *testing.T, has map[string][]string, unset ...string) assetDirs {
	t.Helper()
	root := t.TempDir()
	d := assetDirs{
		explicit:    filepath.Join(root, "explicit"),
		converge:    filepath.Join(root, "converge"),
		kubebuilder: filepath.Join(root, "kubebuilder"),
		cache:       filepath.Join(root, "xdg", "converge", "k8s", envtest.DefaultKubernetesVersion),
	}
	for _, dir := range []string{d.explicit, d.converge, d.kubebuilder, d.cache} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for place, names := range has {
		dir := map[string]string{"explicit": d.explicit, "converge": d.converge, "kubebuilder": d.kubebuilder, "cache": d.cache}[place]
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Setenv(envtest.EnvConvergeAssets, d.converge)
	t.Setenv(envtest.EnvKubebuilderAssets, d.kubebuilder)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(root, "xdg"))
	for _, v := range unset {
		t.Setenv(v, "")
	}
	return d
}

func TestFindBinaryOrder(t *testing.T) {
	tests := []struct {
		name     string
		has      map[string][]string // place → binaries there
		explicit bool                // pass the explicit folder
		unset    []string            // environment variables to clear
		want     map[string]string   // binary → place it is found in
	}{{
		name:     "explicit folder wins",
		has:      map[string][]string{"explicit": {"etcd", "kube-apiserver"}, "converge": {"etcd", "kube-apiserver"}, "kubebuilder": {"etcd", "kube-apiserver"}, "cache": {"etcd", "kube-apiserver"}},
		explicit: true,
		want:     map[string]string{"etcd": "explicit", "kube-apiserver": "explicit"},
	}, {
		name: "CONVERGE_ASSETS beats KUBEBUILDER_ASSETS and the cache",
		has:  map[string][]string{"converge": {"etcd", "kube-apiserver"}, "kubebuilder": {"etcd", "kube-apiserver"}, "cache": {"etcd", "kube-apiserver"}},
		want: map[string]string{"etcd": "converge", "kube-apiserver": "converge"},
	}, {
		name: "KUBEBUILDER_ASSETS beats the cache",
		has:  map[string][]string{"kubebuilder": {"etcd", "kube-apiserver"}, "cache": {"etcd", "kube-apiserver"}},
		want: map[string]string{"etcd": "kubebuilder", "kube-apiserver": "kubebuilder"},
	}, {
		name:  "cache folder last",
		has:   map[string][]string{"cache": {"etcd", "kube-apiserver"}},
		unset: []string{envtest.EnvConvergeAssets, envtest.EnvKubebuilderAssets},
		want:  map[string]string{"etcd": "cache", "kube-apiserver": "cache"},
	}, {
		name:     "each binary falls back on its own",
		has:      map[string][]string{"explicit": {"kube-apiserver"}, "converge": {"etcd"}, "kubebuilder": {"kubectl"}, "cache": {"kube-controller-manager", "kubectl"}},
		explicit: true,
		want:     map[string]string{"kube-apiserver": "explicit", "etcd": "converge", "kubectl": "kubebuilder", "kube-controller-manager": "cache"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := setupAssets(t, tc.has, tc.unset...)
			places := map[string]string{"explicit": d.explicit, "converge": d.converge, "kubebuilder": d.kubebuilder, "cache": d.cache}
			explicit := ""
			if tc.explicit {
				explicit = d.explicit
			}
			for bin, place := range tc.want {
				got, err := envtest.FindBinary(bin, explicit)
				if err != nil {
					t.Fatalf("FindBinary(%q): %v", bin, err)
				}
				if want := filepath.Join(places[place], bin); got != want {
					t.Errorf("FindBinary(%q) = %s, want %s (%s)", bin, got, want, place)
				}
			}
		})
	}
}

func TestFindBinaryMissingNamesEveryPlace(t *testing.T) {
	tests := []struct {
		name     string
		unset    []string
		explicit bool
		want     []string // substrings of the error
	}{{
		name:     "every place set",
		explicit: true,
		want: []string{
			"kube-apiserver not found",
			"Options.BinaryAssetsDirectory=",
			"$CONVERGE_ASSETS=",
			"$KUBEBUILDER_ASSETS=",
			"cache folder $XDG_CACHE_HOME/converge/k8s/" + envtest.DefaultKubernetesVersion + "=",
			"does not exist",
			"make assets",
			"hack/control-plane.sh",
		},
	}, {
		name:  "unset places named as unset",
		unset: []string{envtest.EnvConvergeAssets, envtest.EnvKubebuilderAssets, "XDG_CACHE_HOME"},
		want: []string{
			"Options.BinaryAssetsDirectory (unset)",
			"$CONVERGE_ASSETS (unset)",
			"$KUBEBUILDER_ASSETS (unset)",
			"cache folder $HOME/.cache/converge/k8s/" + envtest.DefaultKubernetesVersion + "=",
			"make assets",
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := setupAssets(t, nil, tc.unset...)
			t.Setenv("HOME", t.TempDir())
			explicit := ""
			if tc.explicit {
				explicit = d.explicit
			}
			_, err := envtest.FindBinary(envtest.KubeAPIServer, explicit)
			if !errors.Is(err, envtest.ErrBinaryNotFound) {
				t.Fatalf("FindBinary error = %v, want ErrBinaryNotFound", err)
			}
			var missing *envtest.MissingBinaryError
			if !errors.As(err, &missing) || missing.Name != envtest.KubeAPIServer || len(missing.Searched) != 4 {
				t.Fatalf("FindBinary error = %#v, want a MissingBinaryError for kube-apiserver with 4 places", err)
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error does not contain %q:\n%v", s, err)
				}
			}
		})
	}
}

func TestFindBinarySkipsWhatIsNotExecutable(t *testing.T) {
	d := setupAssets(t, map[string][]string{"kubebuilder": {"etcd"}})
	if err := os.WriteFile(filepath.Join(d.converge, "etcd"), []byte("not a program"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(d.explicit, "etcd"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := envtest.FindBinary(envtest.Etcd, d.explicit)
	if err != nil {
		t.Fatalf("FindBinary: %v", err)
	}
	if want := filepath.Join(d.kubebuilder, "etcd"); got != want {
		t.Errorf("FindBinary = %s, want %s", got, want)
	}

	// Without the good one, the error says why each place did not do.
	if err := os.Remove(got); err != nil {
		t.Fatal(err)
	}
	_, err = envtest.FindBinary(envtest.Etcd, d.explicit)
	for _, s := range []string{"is a folder", "is not executable", "does not exist"} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("error %v does not contain %q", err, s)
		}
	}
}

func TestStartReportsMissingBinaries(t *testing.T) {
	tests := []struct {
		name    string
		opts    envtest.Options
		missing []string
	}{
		{name: "etcd and kube-apiserver", opts: envtest.Options{}, missing: []string{"etcd not found", "kube-apiserver not found"}},
		{name: "kube-controller-manager when asked for", opts: envtest.Options{ControllerManager: true}, missing: []string{"kube-controller-manager not found"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := setupAssets(t, nil)
			tc.opts.BinaryAssetsDirectory = d.explicit
			env := envtest.New(tc.opts)
			defer env.Stop()
			_, err := env.Start(t.Context())
			if !errors.Is(err, envtest.ErrBinaryNotFound) {
				t.Fatalf("Start error = %v, want ErrBinaryNotFound", err)
			}
			for _, s := range append(tc.missing, "make assets") {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error does not contain %q:\n%v", s, err)
				}
			}
			if env.Dir() != "" || env.Config() != nil {
				t.Errorf("after a failed Start: Dir() = %q, Config() = %v; want both empty", env.Dir(), env.Config())
			}
		})
	}
}
