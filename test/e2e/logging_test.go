package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/reconcile"
)

// logCapture is a logr.Logger that keeps every line, as a JSON object, and
// copies it to GinkgoWriter.
type logCapture struct {
	mu sync.Mutex
	// lines holds every line logged so far; mu guards it.
	lines []map[string]any
}

func (c *logCapture) logger() logr.Logger {
	return funcr.NewJSON(func(obj string) {
		GinkgoWriter.Println(obj)
		var line map[string]any
		if err := json.Unmarshal([]byte(obj), &line); err != nil {
			line = map[string]any{"unparsable": obj}
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.lines = append(c.lines, line)
	}, funcr.Options{})
}

// all returns every line logged so far.
func (c *logCapture) all() []map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]map[string]any(nil), c.lines...)
}

// with returns a function reporting the lines whose field k is v.
func (c *logCapture) with(k string, v any) func() []map[string]any {
	return func() []map[string]any {
		c.mu.Lock()
		defer c.mu.Unlock()
		var out []map[string]any
		for _, l := range c.lines {
			if l[k] == v {
				out = append(out, l)
			}
		}
		return out
	}
}

var _ = Describe("reconcile logging", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("hands each reconcile a logger naming the controller, the object and the reconcile, and logs each failure once", func(ctx SpecContext) {
		logs := &logCapture{}
		mgr := newManager(ns, framework.Options{Logger: logs.logger()})
		calls := newRecorder()
		Expect(framework.NewBuilder[*corev1.ConfigMap](mgr, "chatty", framework.ControllerOptions{}).
			CompleteByKey(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				logr.FromContextOrDiscard(ctx).Info("hello from the reconciler", "attempt", calls.record(req))
				if calls.count(req)() == 1 {
					return reconcile.Result{}, errors.New("not yet")
				}
				return reconcile.Result{}, nil
			}))).To(Succeed())
		startManager(ctx, mgr)
		createConfigMap(ctx, ns, "talker", nil)

		hello := logs.with("msg", "hello from the reconciler")
		Eventually(ctx, hello).Should(HaveLen(2))
		for i, line := range hello() {
			Expect(line).To(HaveKeyWithValue("controller", "chatty"))
			Expect(line).To(HaveKeyWithValue("namespace", ns))
			Expect(line).To(HaveKeyWithValue("name", "talker"))
			Expect(line).To(HaveKeyWithValue("attempt", BeEquivalentTo(i+1)))
			Expect(line).To(HaveKey("reconcileID"))
		}
		Expect(hello()[0]["reconcileID"]).NotTo(Equal(hello()[1]["reconcileID"]), "two reconciles share a reconcile ID")

		// The failure is logged once, by the controller, with the same keys.
		failures := logs.with("error", "not yet")
		Consistently(ctx, failures).WithTimeout(300 * time.Millisecond).Should(HaveLen(1))
		Expect(failures()[0]).To(And(
			HaveKeyWithValue("controller", "chatty"),
			HaveKeyWithValue("namespace", ns),
			HaveKeyWithValue("name", "talker"),
			HaveKeyWithValue("reconcileID", hello()[0]["reconcileID"]),
		))
	}, SpecTimeout(time.Minute))
})
