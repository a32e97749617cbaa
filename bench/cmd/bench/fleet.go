package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/bench/internal/workload"
	"github.com/converge-dev/converge/cluster/secrets"
	"github.com/converge-dev/converge/framework/envtest"
	"github.com/converge-dev/converge/internal/faultproxy"
)

// fleetName is the fleet workload: converge's manager of many clusters,
// which no other contender has.
const fleetName = string(workload.Fleet)

// fleetOpts configures the fleet workload (see bench/README.md).
type fleetOpts struct {
	steps     []int   // idle clusters engaged, ascending (0 is always measured first)
	objects   int     // ConfigMaps of each idle cluster
	flood     int     // ConfigMaps of the flooded cluster, each patched once
	quiet     int     // quiet clusters
	quietRate float64 // ConfigMaps created per second over the quiet clusters during the flood
	polled    int     // ConfigMaps the blackholed cluster's controller polls
	workers   int
	cbor      bool
	memAfter  time.Duration
	deadline  time.Duration
	logDir    string
	// connIdle, when not zero, is how long after the last disengagement
	// of the secrets clusters their memory is read once more: their HTTP
	// transports close an idle connection after 90 s (client-go's
	// IdleConnTimeout).
	connIdle time.Duration
	// profileDir, when not empty, gets a heap profile of every memory
	// point (--profile).
	profileDir string
}

// FleetRun is what the fleet workload measured.
type FleetRun struct {
	// Memory holds one curve per way of engaging the idle clusters:
	// "namespaces" (cluster/namespaces on the manager's control plane) and
	// "secrets" (cluster/secrets, kubeconfig Secrets reaching a second
	// control plane, each through a TCP proxy of its own).
	Memory []FleetMemory `json:"memory"`
	// Isolation is the flood without, then with, a blackholed cluster.
	Isolation []FleetIsolation `json:"isolation"`
	// Objects, Flood, Quiet and Polled are fleetOpts' counts.
	Objects int `json:"objectsPerIdleCluster"`
	Flood   int `json:"flood"`
	Quiet   int `json:"quietClusters"`
	Polled  int `json:"polled"`
}

// FleetMemory is one process's memory as idle clusters are engaged, then
// disengaged.
type FleetMemory struct {
	Via    string          `json:"via"`
	Points []FleetMemPoint `json:"points"`
}

// FleetMemPoint is the process's memory with Clusters idle clusters
// engaged; Disengaged marks the point read after disengaging them all.
// Cycle 1 engages the clusters step by step; cycle 2 engages as many new
// ones at once.
type FleetMemPoint struct {
	Clusters   int  `json:"clusters"`
	Cycle      int  `json:"cycle"`
	Disengaged bool `json:"disengaged,omitempty"`
	// AfterSeconds is how long after the disengagement a Disengaged
	// point was read.
	AfterSeconds float64 `json:"afterSeconds,omitempty"`
	HeapBytes    float64 `json:"heapBytes"` // HeapAlloc after a GC
	RSSBytes     float64 `json:"rssBytes"`  // VmRSS, before that GC
	RSSAnon      float64 `json:"rssAnonBytes"`
	Goroutines   int     `json:"goroutines"`
	CacheBytes   float64 `json:"cacheBytes"` // the caches' own estimate, every cluster's
}

// fleetPlanes are the fleet workload's two control planes: the manager's
// own (its namespaces clusters and Secrets) and a second one, reached only
// through kubeconfig Secrets.
type fleetPlanes struct {
	kubeconfig string   // the manager's plane, for the contender
	home, far  *cluster // the driver's clients of each plane
	farCfg     *rest.Config
	stop       func()
}

// startFleetPlanes starts the two control planes and creates the
// namespaces every run needs.
func startFleetPlanes(ctx context.Context, cbor bool) (*fleetPlanes, error) {
	env1, cfg1, err := controlPlane(ctx, cbor, false, nil)
	if err != nil {
		return nil, err
	}
	env2, cfg2, err := controlPlane(ctx, cbor, false, nil)
	if err != nil {
		env1.Stop()
		return nil, err
	}
	p := &fleetPlanes{kubeconfig: env1.KubeconfigPath(), farCfg: cfg2, stop: func() { env1.Stop(); env2.Stop() }}
	if p.home, err = newCluster(cfg1); err == nil {
		p.far, err = newCluster(cfg2)
	}
	for _, ns := range []string{workload.FleetHome, workload.FleetSecrets} {
		if err == nil {
			err = p.home.namespace(ctx, ns, nil)
		}
	}
	if err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// namespace creates namespace ns with labels, or sets them on it.
func (c *cluster) namespace(ctx context.Context, ns string, labels map[string]string) error {
	_, err := c.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return c.labelNamespace(ctx, ns, labels)
	}
	if err != nil {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	return nil
}

// labelNamespace sets labels on namespace ns; a nil value removes one.
func (c *cluster) labelNamespace(ctx context.Context, ns string, labels map[string]string) error {
	set := map[string]any{}
	for k, v := range labels {
		if v == "" {
			set[k] = nil
		} else {
			set[k] = v
		}
	}
	js, err := json.Marshal(set)
	if err != nil {
		return err
	}
	body := fmt.Sprintf(`{"metadata":{"labels":%s}}`, js)
	if _, err := c.cs.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("label namespace %s: %w", ns, err)
	}
	return nil
}

// configMaps creates n ConfigMaps like those of the configmaps workload in
// ns, with annotations.
func (c *cluster) configMaps(ctx context.Context, ns string, n int, annotations map[string]string) error {
	if err := c.namespace(ctx, ns, nil); err != nil {
		return err
	}
	return parallel(ctx, n, 32, func(ctx context.Context, i int) error {
		cm := workload.NewConfigMap(ns, i)
		cm.Annotations = annotations
		_, err := c.cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create ConfigMap %s/%s: %w", ns, cm.Name, err)
		}
		return nil
	})
}

// farSecret is a kubeconfig Secret, in workload.FleetSecrets, of a cluster
// named name: the far plane through a proxy of its own. The caller closes
// the proxy.
func (p *fleetPlanes) farSecret(ctx context.Context, name string) (*faultproxy.Proxy, error) {
	u, err := url.Parse(p.farCfg.Host)
	if err != nil {
		return nil, err
	}
	proxy, err := faultproxy.New(u.Host)
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(p.farCfg)
	cfg.Host = "https://" + proxy.Addr()
	data, err := envtest.Kubeconfig(cfg)
	if err == nil {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: workload.FleetSecrets, Name: name, Labels: map[string]string{secrets.DefaultLabel: "true"}},
			Data:       map[string][]byte{"kubeconfig": data},
		}
		_, err = p.home.cs.CoreV1().Secrets(workload.FleetSecrets).Create(ctx, s, metav1.CreateOptions{})
	}
	if err != nil {
		proxy.Close()
		return nil, fmt.Errorf("kubeconfig Secret %s: %w", name, err)
	}
	return proxy, nil
}

// deleteSecret deletes the kubeconfig Secret of cluster name.
func (p *fleetPlanes) deleteSecret(ctx context.Context, name string) error {
	err := p.home.cs.CoreV1().Secrets(workload.FleetSecrets).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete kubeconfig Secret %s: %w", name, err)
	}
	return nil
}

// startFleet starts the converge contender's fleet manager.
func startFleet(bin, kubeconfig, tag string, o fleetOpts) (*member, error) {
	dropFromPageCache(bin)
	args := []string{"--kind=" + fleetName, "--kubeconfig=" + kubeconfig, "--workers=" + strconv.Itoa(o.workers)}
	return startMember("converge", bin, args, nil, filepath.Join(o.logDir, tag+".log"), newTracker(map[string]int{}))
}

// fleetStatus is the fleet contender's status line, parsed.
type fleetStatus map[string]string

func (s fleetStatus) int(key string) int {
	n, _ := strconv.Atoi(s[key])
	return n
}

// sum adds the integer fields whose key starts with prefix.
func (s fleetStatus) sum(prefix string) int {
	n := 0
	for k, v := range s {
		if strings.HasPrefix(k, prefix) {
			x, _ := strconv.Atoi(v)
			n += x
		}
	}
	return n
}

// waitFleet polls p's status until ok holds, for at most timeout.
func waitFleet(ctx context.Context, p *member, what string, timeout time.Duration, ok func(fleetStatus) bool) (fleetStatus, error) {
	deadline := time.Now().Add(timeout)
	for {
		st, err := p.status()
		if err != nil {
			return nil, err
		}
		if ok(st) {
			return st, nil
		}
		if time.Now().After(deadline) {
			return st, p.errorf("fleet: not %s within %v (status: %v)", what, timeout, st)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// fleetMemPoint reads p's memory as the other workloads do, RSS after
// memAfter, then the heap, but after a second GC: what a sync.Pool holds
// survives one collection (its "victim" half) and goes at the next, and
// the watches a disengagement ends leave their readers there (gzip
// readers of about 44 KiB each, bufio readers), so the heap after one GC
// counts pooled buffers a disengaged cluster no longer holds.
func fleetMemPoint(ctx context.Context, p *member, clusters int, disengaged bool, memAfter time.Duration) (FleetMemPoint, error) {
	pt := FleetMemPoint{Clusters: clusters, Disengaged: disengaged}
	if err := sleepCtx(ctx, memAfter); err != nil {
		return pt, err
	}
	if st, err := procStatusFields(p.pid()); err == nil {
		pt.RSSBytes, pt.RSSAnon = float64(st["VmRSS"]), float64(st["RssAnon"])
	}
	if _, err := p.memory(); err != nil {
		return pt, err
	}
	m, err := p.memory()
	if err != nil {
		return pt, err
	}
	pt.HeapBytes = float64(m.heapAlloc)
	st, err := p.status()
	if err != nil {
		return pt, err
	}
	pt.Goroutines, pt.CacheBytes = fleetStatus(st).int("goroutines"), float64(fleetStatus(st).int("cacheBytes"))
	return pt, nil
}

// newFleetOpts makes the fleet workload's options from the flags.
func newFleetOpts(steps string, flood int, rate, scale float64, workers int, cbor bool, memAfter, deadline time.Duration, logDir, profileDir string) (fleetOpts, error) {
	o := fleetOpts{objects: 10, flood: max(1, int(float64(flood)*scale)), quiet: 2, quietRate: rate, polled: 20,
		workers: workers, cbor: cbor, memAfter: memAfter, deadline: deadline, logDir: logDir, connIdle: 95 * time.Second, profileDir: profileDir}
	var err error
	if o.steps, err = parseSizes(steps); err != nil {
		return o, fmt.Errorf("--fleet-clusters: %s", strings.TrimPrefix(err.Error(), "--sizes: "))
	}
	if rate <= 0 {
		return o, fmt.Errorf("--fleet-quiet-rate: %v is not a rate", rate)
	}
	return o, nil
}
