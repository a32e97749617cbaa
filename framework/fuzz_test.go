package framework_test

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/converge-dev/converge/framework"
)

// FuzzLoadConfig feeds arbitrary kubeconfig files to LoadConfig: it returns
// a config or an error naming the file, and never panics.
func FuzzLoadConfig(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: https://127.0.0.1:6443}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: t}\n"))
	f.Add([]byte("not: [valid"))
	f.Add([]byte(""))
	f.Add([]byte("current-context: missing\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "kubeconfig")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := framework.LoadConfig(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
			return
		}
		if cfg == nil {
			t.Error("nil config without an error")
		}
	})
}

// FuzzFlags parses arbitrary command lines with the standard flags: Options
// either succeeds or returns an error; it never panics.
func FuzzFlags(f *testing.F) {
	f.Add("--leader-elect\x00--metrics-bind-address=:8443\x00-v=3")
	f.Add("--log-format=xml")
	f.Add("-v=-1\x00--health-probe-bind-address=0")
	f.Add("--kubeconfig\x00")
	f.Fuzz(func(t *testing.T, args string) {
		var fl framework.Flags
		fs := flag.NewFlagSet("fuzz", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fl.Register(fs)
		if fs.Parse(strings.Split(args, "\x00")) != nil {
			return
		}
		opts, err := fl.Options()
		if err == nil && opts.Logger.GetSink() == nil {
			t.Error("Options succeeded without a logger")
		}
	})
}
