package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/reconcile"
)

// Exit statuses of converge explain, besides 0 (converged).
const (
	exitNotConverged = 1
	// exitBadInput is a bad command line, or input that names nothing the
	// manager reconciles (see misnamed): the status of usage errors.
	exitBadInput    = 2
	exitUnreachable = 3
)

// exitError ends a command with status code after printing msg, if any.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// maxExplainResponse bounds what explain reads of an answer.
const maxExplainResponse = 4 << 20

var explainCommand = command{
	path:       "explain",
	summary:    "say why an object is or is not converged, asking a running manager",
	positional: true,
	usage: `Usage: converge explain KIND NAMESPACE/NAME [flags]
       converge explain KIND NAME [flags]        (a cluster-scoped object)

Asks the debug endpoint of a running manager (served next to its /metrics)
where the object stands in each controller of its kind, and prints a few
lines: queued and why, in flight and for how long, its backoff and last
error, what it waits for, or that its informer is not synced.
KIND is a kind (Deployment), kind.group (deployment.apps) or "apps/v1 Deployment".
With --cluster NAME it reads the object in that cluster of a manager of
many clusters (as the debug page's Clusters table names them), through the
controllers that watch it; a controller that does not says so.

Without --url, in a project whose make run is running, it asks that
manager: make run serves the page on loopback and writes its URL to
bin/metrics-url, which explain reads from here or a parent folder.
  converge explain Order default/order-sample

In a cluster, forward the metrics port and use a token of an identity
bound to the project's <name>-debug-reader ClusterRole (get on
/debug/converge/*; config/rbac/debug_reader_role.yaml), e.g. a service
account of your own:
  kubectl -n op-system create serviceaccount op-debugger
  kubectl create clusterrolebinding op-debugger --clusterrole=op-debug-reader --serviceaccount=op-system:op-debugger
  kubectl -n op-system port-forward deploy/op-controller-manager 8443 &
  converge explain Order shop/web --url https://localhost:8443 --insecure-skip-tls-verify \
    --token "$(kubectl -n op-system create token op-debugger)"

Exit status:
  0  converged in every controller of its kind: its last reconcile succeeded,
     noted no blocker, and nothing is queued, running or retried
  1  not converged: failing, waiting (what for is printed), not ready, queued,
     in flight, not seen by the controller, or gone (deleted)
  2  bad input: a bad command line, a kind no controller of the manager
     reconciles (the kinds there are are printed), --controller naming none
     of its controllers, or a namespace missing for a namespaced kind
  3  the manager could not be asked (unreachable, 401, 403, no debug endpoint)
`,
	flags: func(fs *flag.FlagSet) func(context.Context, *ui) error {
		o := explainOptions{}
		fs.StringVar(&o.url, "url", "", "base `URL` of the manager's metrics server (default: the URL in bin/metrics-url, written by a running make run, else "+defaultExplainURL+")")
		fs.StringVar(&o.token, "token", "", "bearer token sent to an authenticated metrics server (also $CONVERGE_TOKEN)")
		fs.StringVar(&o.tokenFile, "token-file", "", "file holding the bearer token")
		fs.StringVar(&o.caFile, "ca-file", "", "PEM CA bundle verifying the metrics server's certificate")
		fs.BoolVar(&o.insecureTLS, "insecure-skip-tls-verify", false, "accept any certificate (the default self-signed one, through a port-forward)")
		fs.StringVar(&o.output, "o", "text", "output: text or json")
		fs.StringVar(&o.controller, "controller", "", "only this controller")
		fs.StringVar(&o.cluster, "cluster", "", "the object's cluster, as the manager names it (its debug page lists them); default: the manager's own")
		fs.DurationVar(&o.timeout, "timeout", 15*time.Second, "how long to wait for the answer")
		return func(ctx context.Context, u *ui) error {
			o.args = fs.Args()
			return runExplain(ctx, u, o)
		}
	},
}

// defaultExplainURL is the metrics server explain asks when given no
// --url and no make run is found: a kubectl port-forward's.
const defaultExplainURL = "https://localhost:8443"

type explainOptions struct {
	url, token, tokenFile, caFile, output, controller, cluster string
	insecureTLS                                                bool
	timeout                                                    time.Duration
	args                                                       []string
}

// explanation is the JSON converge explain -o json prints.
type explanation struct {
	Converged   bool                    `json:"converged"`
	Controllers []controllerExplanation `json:"controllers"`
	Status      introspect.ObjectStatus `json:"status"`
}

type controllerExplanation struct {
	Controller string   `json:"controller"`
	Converged  bool     `json:"converged"`
	Lines      []string `json:"lines"`
}

func runExplain(ctx context.Context, u *ui, o explainOptions) error {
	if len(o.args) != 2 {
		return usagef("want KIND and NAMESPACE/NAME (or NAME for a cluster-scoped object), got %d argument(s)", len(o.args))
	}
	if o.output != "text" && o.output != "json" {
		return usagef("-o must be text or json, got %q", o.output)
	}
	kind, key := o.args[0], o.args[1]
	ns, name, ok := strings.Cut(key, "/")
	if !ok {
		ns, name = "", key
	}
	if kind == "" || name == "" || strings.Contains(name, "/") {
		return usagef("want KIND and NAMESPACE/NAME, got %q %q", kind, key)
	}
	from := "" // where the URL came from, when not from --url
	if o.url == "" {
		o.url, from = localRunURL()
	}
	base, err := url.Parse(o.url)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		if from != "" {
			return fmt.Errorf("%s holds %q, not an http or https URL with a host: delete it, or pass --url", from, o.url)
		}
		return usagef("--url must be an http or https URL with a host, got %q", o.url)
	}
	client, token, err := o.client()
	if err != nil {
		return err
	}
	q := url.Values{"kind": {kind}, "namespace": {ns}, "name": {name}}
	if o.cluster != "" {
		q.Set("cluster", o.cluster)
	}
	endpoint := base.JoinPath(introspect.Path, "api", "object")
	endpoint.RawQuery = q.Encode()
	var st introspect.ObjectStatus
	if err := getJSON(ctx, client, endpoint.String(), token, o.timeout, &st); err != nil {
		msg := err.Error()
		if from != "" {
			msg += fmt.Sprintf("\n(the URL is from %s, which make run writes while it runs: is it still running? Pass --url otherwise)", from)
		}
		return exitError{code: exitUnreachable, msg: msg}
	}

	bad := misnamed(st, o.controller)
	now := time.Now()
	ex := explanation{Converged: true, Status: st, Controllers: []controllerExplanation{}}
	for _, ks := range st.Controllers {
		if o.controller != "" && ks.Controller != o.controller {
			continue
		}
		lines, converged := ks.Explain(now)
		ex.Controllers = append(ex.Controllers, controllerExplanation{Controller: ks.Controller, Converged: converged, Lines: lines})
		ex.Converged = ex.Converged && converged
	}
	if len(ex.Controllers) == 0 {
		ex.Converged = false
	}
	if o.output == "json" {
		enc := json.NewEncoder(u.out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(ex); err != nil {
			return err
		}
	} else if bad == nil {
		printExplanation(u, ex, o.controller)
	}
	if bad != nil {
		return bad
	}
	if !ex.Converged {
		return exitError{code: exitNotConverged}
	}
	return nil
}

func printExplanation(u *ui, ex explanation, only string) {
	st := ex.Status
	what := reconcile.Request{Cluster: st.Cluster, Namespace: st.Namespace, Name: st.Name}.String()
	if len(ex.Controllers) == 0 {
		if only != "" {
			u.printf("%s %s: no controller named %q reconciles this kind in the manager\n", st.Kind, what, only)
		} else {
			u.printf("%s %s: no controller of the manager reconciles this kind\n", st.Kind, what)
		}
		for _, inf := range st.Informers {
			state := "synced"
			if inf.Err != nil {
				state = inf.Err.Error()
			} else if !inf.Synced {
				state = "not synced"
			}
			u.printf("  informer %s: %s\n", inf.Description, state)
		}
		return
	}
	for i, c := range ex.Controllers {
		ks := st.Controllers[0]
		for _, s := range st.Controllers {
			if s.Controller == c.Controller {
				ks = s
			}
		}
		if i > 0 {
			u.printf("\n")
		}
		u.printf("%s %s in controller %s:\n", ks.Kind.Kind, what, c.Controller)
		for _, l := range c.Lines {
			u.printf("  %s\n", l)
		}
	}
}

// client returns the HTTP client and the token the flags ask for.
func (o explainOptions) client() (*http.Client, string, error) {
	token := o.token
	if token == "" {
		token = os.Getenv("CONVERGE_TOKEN")
	}
	if o.tokenFile != "" {
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return nil, "", fmt.Errorf("--token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: o.insecureTLS} //nolint:gosec // only when asked for
	if o.caFile != "" {
		pem, err := os.ReadFile(o.caFile)
		if err != nil {
			return nil, "", fmt.Errorf("--ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, "", fmt.Errorf("--ca-file %s holds no PEM certificate", o.caFile)
		}
		tc.RootCAs = pool
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	tr.Proxy = nil // a port-forward on localhost, or a cluster address: never a proxy
	return &http.Client{Transport: tr}, token, nil
}

// getJSON reads url into v, naming what went wrong in terms of the flags.
func getJSON(ctx context.Context, client *http.Client, addr, token string, timeout time.Duration, v any) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := client.Do(req)
	if err != nil {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err // the URL is said once, below
		}
		var cert *tls.CertificateVerificationError
		if errors.As(err, &cert) {
			return fmt.Errorf("get %s: %w (the metrics server's certificate is self-signed by default: pass --ca-file or --insecure-skip-tls-verify)", addr, err)
		}
		return fmt.Errorf("get %s: %w (is the manager running, and its metrics port forwarded?)", addr, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxExplainResponse))
	if err != nil {
		return fmt.Errorf("get %s: %w", addr, err)
	}
	switch res.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized:
		return fmt.Errorf("get %s: 401 Unauthorized: pass a bearer token with --token or --token-file", addr)
	case http.StatusForbidden:
		return fmt.Errorf("get %s: 403 Forbidden: %s (grant get on nonResourceURLs /debug/converge/*)", addr, strings.TrimSpace(string(body)))
	case http.StatusNotFound:
		var e struct{ Error string }
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return fmt.Errorf("get %s: %s", addr, e.Error)
		}
		return fmt.Errorf("get %s: 404: the manager serves no debug endpoint (MetricsOptions.DisableDebug, or a manager older than it)", addr)
	default:
		return fmt.Errorf("get %s: %s: %s", addr, res.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("get %s: not a debug endpoint's answer: %w", addr, err)
	}
	return nil
}

// metricsURLFile is where a project's make run writes the URL of its
// manager's metrics server while the manager serves it (hack/run).
const metricsURLFile = "bin/metrics-url"

// localRunURL returns the URL a running make run wrote to metricsURLFile,
// looked for in the current folder and its parents up to the project's
// root (the first with a go.mod), and the file's path; else
// defaultExplainURL and "".
func localRunURL() (url, from string) {
	dir, err := os.Getwd()
	if err != nil {
		return defaultExplainURL, ""
	}
	for {
		p := filepath.Join(dir, filepath.FromSlash(metricsURLFile))
		if b, err := os.ReadFile(p); err == nil {
			return strings.TrimSpace(string(b)), p
		}
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return defaultExplainURL, ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return defaultExplainURL, ""
		}
		dir = parent
	}
}
