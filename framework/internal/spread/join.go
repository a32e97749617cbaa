package spread

import (
	"fmt"
	"net/http"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	"github.com/converge-dev/converge/cluster"
	"github.com/converge-dev/converge/framework/internal/ring"
	"github.com/converge-dev/converge/sharding"
)

// Member is what Join makes of a manager: its ring, not started yet, and
// the ring's series.
type Member struct {
	Ring    *ring.Ring
	Metrics *ring.Metrics
}

// Join makes a manager of API server cfg (reached through hc) a member of
// the sharding ring of opts: its ring's series are registered in reg and
// it logs to log; syncHeapRatio bounds the heap while a bucket first syncs
// (ring.Ring.SyncHeapRatio). g, when not nil, spreads the clusters of set
// over the ring.
func Join(cfg *rest.Config, hc *http.Client, opts sharding.Options, log logr.Logger, reg *prometheus.Registry, syncHeapRatio float64, g *Gate, set *cluster.Set) (Member, error) {
	// The ring's Leases only: the whole clientset would build a client
	// of every API group, and each member would pay for their code.
	cs, err := coordclient.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return Member{}, fmt.Errorf("framework: sharding client for %s: %w", cfg.Host, err)
	}
	m := Member{Metrics: ring.NewMetrics(opts.Ring)}
	m.Metrics.Register(reg)
	m.Ring = ring.New(cs, opts, log, m.Metrics)
	m.Ring.SyncHeapRatio = syncHeapRatio
	if err := g.Bind(set, m.Ring); err != nil {
		return Member{}, err
	}
	return m, nil
}
