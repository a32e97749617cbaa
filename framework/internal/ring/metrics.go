package ring

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the series of a sharding ring.
type Metrics struct {
	ring      string
	Buckets   *prometheus.GaugeVec
	Handovers *prometheus.CounterVec
	Durations *prometheus.HistogramVec
	Abandoned *prometheus.CounterVec
	Dropped   *prometheus.CounterVec
	Refused   *prometheus.CounterVec
	Clusters  *prometheus.GaugeVec
}

// NewMetrics returns the series of the ring named ring, unregistered.
func NewMetrics(ring string) *Metrics {
	return &Metrics{
		ring: ring,
		Buckets: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "converge_shard_buckets",
			Help: "Buckets of the sharding ring this member holds, by state (serving, syncing, draining).",
		}, []string{"ring", "state"}),
		Handovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "converge_shard_handovers_total",
			Help: "Buckets that moved to this member (in), away from it after draining (out), or away from it without a drain because another member holds them now (lost).",
		}, []string{"ring", "direction"}),
		Durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "converge_shard_handover_duration_seconds",
			Help:    "How long a handover took here: from claim to serving (sync), or from giving a bucket up to releasing it (drain).",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"ring", "phase"}),
		Abandoned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "converge_shard_abandoned_reconciles_total",
			Help: "Reconciles still running when their bucket was handed over after HandoverTimeout; their writes are Refused.",
		}, []string{"ring"}),
		Dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "converge_shard_keys_dropped_total",
			Help: "Keys a sharded controller did not reconcile because their bucket is held by another member (which reconciles them), per controller.",
		}, []string{"ring", "controller"}),
		Clusters: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "converge_shard_clusters",
			Help: "Clusters spread over the sharding ring (sharding.Options.Clusters) that this member holds, by state (serving, syncing, draining).",
		}, []string{"ring", "state"}),
		Refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "converge_shard_refusals_total",
			Help: "Times this member was Refused by its ring: members of another layout (Buckets.Count, Buckets.By or sharded controllers) held it. sharding.Status.Refused and /readyz say which while it lasts.",
		}, []string{"ring"}),
	}
}

func (m *Metrics) Register(r *prometheus.Registry) {
	r.MustRegister(m.Buckets, m.Handovers, m.Durations, m.Abandoned, m.Dropped, m.Refused, m.Clusters)
	m.Refused.WithLabelValues(m.ring)
	for _, d := range []string{"in", "out", "lost"} {
		m.Handovers.WithLabelValues(m.ring, d)
	}
}

// set records how many buckets and clusters are held in each state.
func (m *Metrics) set(n, c [3]int) {
	m.Clusters.WithLabelValues(m.ring, "syncing").Set(float64(c[bucketSyncing]))
	m.Clusters.WithLabelValues(m.ring, "serving").Set(float64(c[bucketServing]))
	m.Clusters.WithLabelValues(m.ring, "draining").Set(float64(c[bucketDraining]))
	m.Buckets.WithLabelValues(m.ring, "syncing").Set(float64(n[bucketSyncing]))
	m.Buckets.WithLabelValues(m.ring, "serving").Set(float64(n[bucketServing]))
	m.Buckets.WithLabelValues(m.ring, "draining").Set(float64(n[bucketDraining]))
}
