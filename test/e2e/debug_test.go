package e2e_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/reconcile"
)

// secretValue is what the credentials controller writes into every Secret:
// no answer of the debug endpoint may contain it, plain or base64.
const secretValue = "hunter2-top-secret"

// debugFixture is a manager running the debug specs' controllers over the
// ConfigMaps of one namespace:
//   - credentials owns a Secret per ConfigMap holding secretValue; it fails
//     for "bad" (with an error naming the object, not the secret), notes a
//     wait for "web" and converges the others;
//   - held holds the first key it gets until the spec ends, ignoring its
//     context, so its other keys stay queued;
//   - ticker asks for every ConfigMap again after 200 ms, so its numbers
//     keep moving;
//   - more builds other controllers, if any.
type debugFixture struct {
	ns  string
	mgr *framework.Manager
}

func newDebugFixture(ctx context.Context, opts framework.Options, bulk int, more ...func(*framework.Manager)) *debugFixture {
	GinkgoHelper()
	f := &debugFixture{ns: newNamespace(ctx)}
	for _, name := range []string{"good", "bad", "web"} {
		createConfigMap(ctx, f.ns, name, map[string]string{"config": "cm-data-value"})
	}
	for i := range bulk {
		createConfigMap(ctx, f.ns, fmt.Sprint("bulk-", i), nil)
	}
	if opts.Metrics.BindAddress == "" {
		opts.Metrics = framework.MetricsOptions{BindAddress: "127.0.0.1:0", Insecure: true}
	}
	f.mgr = newManager(f.ns, opts)
	credentials := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name + "-creds"},
			StringData: map[string]string{"password": secretValue},
		}
		if _, err := kube.CoreV1().Secrets(req.Namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, err
		}
		switch req.Name {
		case "bad":
			return reconcile.Result{}, fmt.Errorf("rotate credentials of %s: vault is sealed", req)
		case "web":
			framework.NoteBlocked(ctx, reconcile.Blocker{Reason: "Waiting", Message: "Deployment web waits for Job migrate (Complete)"})
		}
		return reconcile.Result{}, nil
	})
	Expect(framework.NewBuilder[*corev1.ConfigMap](f.mgr, "credentials", framework.ControllerOptions{Workers: 2}).
		Owns(&corev1.Secret{}).CompleteByKey(credentials)).To(Succeed())
	release := make(chan struct{})
	held := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		<-release
		return reconcile.Result{}, nil
	})
	Expect(framework.NewBuilder[*corev1.ConfigMap](f.mgr, "held", framework.ControllerOptions{}).CompleteByKey(held)).To(Succeed())
	ticker := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{RequeueAfter: 200 * time.Millisecond}, nil
	})
	Expect(framework.NewBuilder[*corev1.ConfigMap](f.mgr, "ticker", framework.ControllerOptions{}).CompleteByKey(ticker)).To(Succeed())
	for _, build := range more {
		build(f.mgr)
	}
	startManager(ctx, f.mgr)
	DeferCleanup(func() { close(release) }) // before the manager stops (cleanups run last in, first out)
	Eventually(ctx, f.mgr.MetricsAddress).ShouldNot(BeEmpty())
	return f
}

// url is the debug endpoint's address of path (below introspect.Path).
func (f *debugFixture) url(path string) string {
	return "http://" + f.mgr.MetricsAddress() + introspect.Path + path
}

func (f *debugFixture) get(ctx context.Context, path string) response {
	GinkgoHelper()
	res, err := httpGet(ctx, http.DefaultClient, f.url(path))()
	Expect(err).NotTo(HaveOccurred())
	return res
}

func decodeJSON[V any](body string) V {
	GinkgoHelper()
	var v V
	Expect(json.Unmarshal([]byte(body), &v)).To(Succeed(), body)
	return v
}

// object returns the state of ConfigMap name in controller.
func (f *debugFixture) object(ctx context.Context, controller, name string) introspect.KeyStatus {
	GinkgoHelper()
	res := f.get(ctx, "api/object?"+url.Values{"kind": {"ConfigMap"}, "namespace": {f.ns}, "name": {name}}.Encode())
	Expect(res.Code).To(Equal(http.StatusOK), res.Body)
	for _, ks := range decodeJSON[introspect.ObjectStatus](res.Body).Controllers {
		if ks.Controller == controller {
			return ks
		}
	}
	Fail("no state of " + name + " in controller " + controller + ": " + res.Body)
	return introspect.KeyStatus{}
}

// explain runs converge explain and returns its exit status and output.
func explain(ctx context.Context, args ...string) (int, string) {
	GinkgoHelper()
	cmd := bins.command(ctx, "converge", append([]string{"explain"}, args...)...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	Expect(err).NotTo(HaveOccurred(), string(out))
	return 0, string(out)
}

var _ = Describe("debug endpoint", func() {
	It("serves controllers, queues by priority, in-flight keys and per-key histories as JSON, paging the queue", func(ctx SpecContext) {
		const bulk = 30
		f := newDebugFixture(ctx, framework.Options{}, bulk)

		By("listing the controllers, the informers and the held key")
		var state introspect.State
		Eventually(ctx, func(g Gomega) {
			res := f.get(ctx, "api/state")
			g.Expect(res.Code).To(Equal(http.StatusOK))
			state = decodeJSON[introspect.State](res.Body)
			g.Expect(state.Controllers).To(HaveLen(3))
			// Each controller runs once its informers synced, which the
			// held key's in-flight reconcile does not wait for.
			g.Expect(state.Controllers).To(HaveEach(HaveField("State", "running")))
			g.Expect(state.Controllers[1].InFlight).To(HaveLen(1))
			q := state.Controllers[1].Queue
			g.Expect(q.Normal.Depth + q.Replay.Depth).To(Equal(bulk + 2))
		}).Should(Succeed())
		Expect(state.Leader.Leading).To(BeTrue())
		for i, name := range []string{"credentials", "held", "ticker"} {
			Expect(state.Controllers[i].Name).To(Equal(name))
			Expect(state.Controllers[i].State).To(Equal("running"))
			Expect(state.Controllers[i].Kind.String()).To(Equal("v1 ConfigMap"))
		}
		Expect(state.Informers).To(ContainElement(And(HaveField("Kind.Kind", "Secret"), HaveField("Synced", true))))
		held := state.Controllers[1].InFlight[0]
		Expect(held.Worker).To(Equal(1))
		Expect(held.Namespace).To(Equal(f.ns))

		By("paging the held controller's queue, never listing a key twice or the held one")
		seen := map[string]bool{}
		for offset := 0; offset <= bulk+2; offset += 8 {
			res := f.get(ctx, fmt.Sprintf("api/queue?controller=held&offset=%d&limit=8", offset))
			Expect(res.Code).To(Equal(http.StatusOK), res.Body)
			page := decodeJSON[introspect.QueuePage](res.Body)
			Expect(page.Total).To(Equal(bulk + 2))
			Expect(len(page.Keys)).To(BeNumerically("<=", 8))
			for _, k := range page.Keys {
				Expect(seen).NotTo(HaveKey(k.Key.Name))
				seen[k.Key.Name] = true
				Expect(k.Replay).To(BeTrue(), "keys of the initial list wait at replay priority")
			}
		}
		Expect(seen).To(HaveLen(bulk + 2))
		Expect(seen).NotTo(HaveKey(held.Name))

		By("keeping the failing key's history, error, failures and next attempt")
		Eventually(ctx, func(g Gomega) {
			bad := f.object(ctx, "credentials", "bad")
			g.Expect(bad.Queue.Retries).To(BeNumerically(">=", 3))
			g.Expect(bad.History).NotTo(BeEmpty())
			g.Expect(bad.History[0].Result).To(Equal("error"))
			g.Expect(bad.History[0].Error).To(Equal(fmt.Sprintf("rotate credentials of %s/bad: vault is sealed", f.ns)))
			g.Expect(bad.Queue.Delayed || bad.Queue.Queued || bad.InFlight != nil).To(BeTrue())
		}).Should(Succeed())
		Eventually(ctx, func(g Gomega) {
			web := f.object(ctx, "credentials", "web")
			g.Expect(web.History).NotTo(BeEmpty())
			g.Expect(web.History[0].Blocked).To(Equal(&reconcile.Blocker{Reason: "Waiting", Message: "Deployment web waits for Job migrate (Complete)"}))
		}).Should(Succeed(), "the waiting key's history has its note")

		By("refusing bad input with a clear error")
		res := f.get(ctx, "api/queue?controller=held&limit=501")
		Expect(res.Code).To(Equal(http.StatusBadRequest))
		Expect(res.Body).To(ContainSubstring("limit must be between 1 and 500"))
		res = f.get(ctx, "api/key?controller=nobody&namespace=x&name=y")
		Expect(res.Code).To(Equal(http.StatusNotFound))
	}, SpecTimeout(2*time.Minute))

	It("leaks no Secret data: names, namespaces, states and error texts only", func(ctx SpecContext) {
		f := newDebugFixture(ctx, framework.Options{}, 0)
		Eventually(ctx, func(g Gomega) {
			s, err := kube.CoreV1().Secrets(f.ns).Get(ctx, "bad-creds", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(s.Data["password"])).To(Equal(secretValue))
			g.Expect(f.object(ctx, "credentials", "bad").Queue.Retries).To(BeNumerically(">=", 2))
			g.Expect(f.object(ctx, "credentials", "good").History).NotTo(BeEmpty())
		}).Should(Succeed())
		var bodies []string
		paths := []string{"", "?controller=credentials&key=" + f.ns + "/bad", "api/state",
			"api/queue?controller=held", "api/queue?controller=credentials"}
		for _, name := range []string{"good", "bad", "web", "good-creds", "bad-creds"} {
			for _, kind := range []string{"ConfigMap", "Secret"} {
				paths = append(paths, "api/object?"+url.Values{"kind": {kind}, "namespace": {f.ns}, "name": {name}}.Encode())
			}
			paths = append(paths, "api/key?"+url.Values{"controller": {"credentials"}, "namespace": {f.ns}, "name": {name}}.Encode())
		}
		for _, p := range paths {
			res := f.get(ctx, p)
			Expect(res.Code).To(Equal(http.StatusOK), p)
			bodies = append(bodies, res.Body)
		}
		all := strings.Join(bodies, "\n")
		Expect(all).To(ContainSubstring("vault is sealed"), "error texts are shown")
		Expect(all).NotTo(ContainSubstring(secretValue))
		Expect(all).NotTo(ContainSubstring(base64.StdEncoding.EncodeToString([]byte(secretValue))))
		Expect(all).NotTo(ContainSubstring("cm-data-value"), "nor any other object data")
	}, SpecTimeout(2*time.Minute))

	It("is guarded as /metrics is: 401 without a token, 403 without the /debug/converge grant, 200 with it", func(ctx SpecContext) {
		f := newDebugFixture(ctx, framework.Options{Metrics: framework.MetricsOptions{BindAddress: "127.0.0.1:0"}}, 0)
		base := "https://" + f.mgr.MetricsAddress()
		client := insecureTLSClient()
		scraper, scraperUser := serviceAccountToken(ctx, f.ns, "scraper")
		debugger, debuggerUser := serviceAccountToken(ctx, f.ns, "debugger")
		grantClusterRole(ctx, "e2e-debug-scraper-"+f.ns,
			[]rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}, serviceAccount(f.ns, "scraper"))
		grantClusterRole(ctx, "e2e-debugger-"+f.ns,
			[]rbacv1.PolicyRule{{NonResourceURLs: []string{"/debug/converge/*"}, Verbs: []string{"get"}}}, serviceAccount(f.ns, "debugger"))
		Eventually(ctx, allowed(ctx, scraperUser, []string{"system:serviceaccounts"}, nil, &authzv1.NonResourceAttributes{Path: "/metrics", Verb: "get"})).Should(BeTrue())
		Eventually(ctx, allowed(ctx, debuggerUser, []string{"system:serviceaccounts"}, nil, &authzv1.NonResourceAttributes{Path: "/debug/converge/api/state", Verb: "get"})).Should(BeTrue())

		for _, path := range []string{introspect.Path, introspect.Path + "api/state"} {
			res, err := bearerGet(ctx, client, base+path, "")()
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Code).To(Equal(http.StatusUnauthorized), path)
			Expect(res.Body).NotTo(ContainSubstring("credentials"))

			res, err = bearerGet(ctx, client, base+path, scraper)()
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Code).To(Equal(http.StatusForbidden), "%s: a /metrics grant is not a debug grant", path)
			Expect(res.Body).NotTo(ContainSubstring(`"credentials"`))
			Expect(res.Body).To(ContainSubstring("decisions are kept for 10s: a grant made since applies within 10s"))

			res, err = bearerGet(ctx, client, base+path, debugger)()
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Code).To(Equal(http.StatusOK), path)
			Expect(res.Body).To(ContainSubstring("credentials"))
		}

		By("converge explain through TLS with the debugger's token")
		Eventually(ctx, func(g Gomega) {
			code, out := explain(ctx, "ConfigMap", f.ns+"/good", "--url", base, "--token", debugger, "--insecure-skip-tls-verify", "--controller", "credentials")
			g.Expect(code).To(Equal(0), out)
			g.Expect(out).To(ContainSubstring("converged: last reconciled"))
		}).Should(Succeed())
		code, out := explain(ctx, "ConfigMap", f.ns+"/good", "--url", base, "--insecure-skip-tls-verify")
		Expect(code).To(Equal(3), out)
		Expect(out).To(ContainSubstring("401 Unauthorized"))
	}, SpecTimeout(2*time.Minute))
})

var _ = Describe("converge explain", func() {
	It("says why an object is not converged: failing, waiting, in flight, or converged", func(ctx SpecContext) {
		f := newDebugFixture(ctx, framework.Options{}, 0)
		base := "http://" + f.mgr.MetricsAddress()

		By("a failing object: delayed for its retry, with its failures and last error")
		Eventually(ctx, func(g Gomega) {
			code, out := explain(ctx, "ConfigMap", f.ns+"/bad", "--url", base, "--controller", "credentials")
			g.Expect(code).To(Equal(1), out)
			g.Expect(out).To(MatchRegexp(`delayed \(retry\) since \S+, next attempt in \S+ after \d+ failures: last error: rotate credentials of %s/bad: vault is sealed`, f.ns))
		}).Should(Succeed())

		By("an object its reconciler says is waiting")
		code, out := explain(ctx, "configmap", f.ns+"/web", "--url", base, "--controller", "credentials")
		Expect(code).To(Equal(1), out)
		Expect(out).To(ContainSubstring("waiting: Deployment web waits for Job migrate (Complete)"))

		By("an object a worker holds")
		var held introspect.InFlightKey
		Eventually(ctx, func(g Gomega) {
			res := f.get(ctx, "api/state")
			st := decodeJSON[introspect.State](res.Body)
			g.Expect(st.Controllers[1].InFlight).To(HaveLen(1))
			held = st.Controllers[1].InFlight[0]
		}).Should(Succeed())
		code, out = explain(ctx, "ConfigMap", f.ns+"/"+held.Name, "--url", base, "--controller", "held")
		Expect(code).To(Equal(1), out)
		Expect(out).To(MatchRegexp(`in flight for \S+ on worker 1`))

		By("a converged object, and JSON")
		code, out = explain(ctx, "v1 ConfigMap", f.ns+"/good", "--url", base, "--controller", "credentials", "-o", "json")
		Expect(code).To(Equal(0), out)
		Expect(out).To(ContainSubstring(`"converged": true`))
	}, SpecTimeout(2*time.Minute))

	It("answers bad input with exit status 2 and what there is, and says in JSON what its text says", func(ctx SpecContext) {
		f := newDebugFixture(ctx, framework.Options{}, 0)
		base := "http://" + f.mgr.MetricsAddress()

		By("a mistyped kind: the kinds there are, and the closest")
		code, out := explain(ctx, "ConfigMp", f.ns+"/good", "--url", base)
		Expect(code).To(Equal(2), out)
		Expect(out).To(ContainSubstring(`no controller of the manager reconciles kind "ConfigMp": did you mean ConfigMap? It reconciles v1 ConfigMap`))

		By("a forgotten namespace: the kind is namespaced")
		code, out = explain(ctx, "ConfigMap", "good", "--url", base)
		Expect(code).To(Equal(2), out)
		Expect(out).To(ContainSubstring("ConfigMap is namespaced: name the object NAMESPACE/good"))

		By("a failing object: delayed in the text and in the JSON, and its informer's objects counted as the page counts them")
		Eventually(ctx, func(g Gomega) {
			code, out := explain(ctx, "ConfigMap", f.ns+"/bad", "--url", base, "--controller", "credentials", "-o", "json")
			g.Expect(code).To(Equal(1), out)
			var ex struct {
				Controllers []struct{ Lines []string }
				Status      introspect.ObjectStatus
			}
			g.Expect(json.Unmarshal([]byte(out), &ex)).To(Succeed())
			ks := ex.Status.Controllers[0]
			g.Expect(ex.Controllers[0].Lines[0]).To(HavePrefix("delayed (retry) since "))
			g.Expect(ks.Queue.Delayed).To(BeTrue(), out)
			g.Expect(ks.Queue.Queued).To(BeFalse(), out)
			state := decodeJSON[introspect.State](f.get(ctx, "api/state").Body)
			var objects []int
			for _, inf := range state.Informers {
				if inf.Description == ks.Informer.Description {
					objects = append(objects, inf.Objects)
				}
			}
			g.Expect(objects).To(Equal([]int{ks.Informer.Objects}))
			g.Expect(ks.Informer.Objects).To(BeNumerically(">=", 3), "good, bad and web")
		}).Should(Succeed())
	}, SpecTimeout(2*time.Minute))

	It("says an object was never seen because its informer may not list the kind", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		userCfg, _ := unprivileged(ctx, ns)
		mgr, err := framework.NewManager(userCfg, managerOptions(ns, framework.Options{
			Metrics: framework.MetricsOptions{BindAddress: "127.0.0.1:0", Insecure: true},
		}))
		Expect(err).NotTo(HaveOccurred())
		Expect(framework.NewBuilder[*appsv1.Deployment](mgr, "web", framework.ControllerOptions{}).
			CompleteByKey(countingReconciler(newRecorder()))).To(Succeed())
		runManager(ctx, mgr) // Start fails once the sync times out: not waited for
		Eventually(ctx, mgr.MetricsAddress).ShouldNot(BeEmpty())
		Eventually(ctx, func(g Gomega) {
			code, out := explain(ctx, "Deployment", ns+"/web", "--url", "http://"+mgr.MetricsAddress())
			g.Expect(code).To(Equal(1), out)
			g.Expect(out).To(ContainSubstring("never seen: the informer for apps/v1 Deployment is not synced: "))
			g.Expect(out).To(ContainSubstring("forbidden"))
			g.Expect(out).To(ContainSubstring("deployments.apps"))
		}).Should(Succeed())
	}, SpecTimeout(2*time.Minute))
})
