package cluster

import "github.com/converge-dev/converge/informers"

// Stats is a cluster's state and what its cache holds.
type Stats struct {
	Health
	// Informers is the number of informers of the cluster's cache,
	// Objects the objects they hold, and Bytes their estimated heap bytes
	// (informers.InformerStats.Bytes summed, plus the values they share,
	// informers.Cache.SharedBytes). All three are zero unless the cluster
	// is engaged (StateReady or StateUnhealthy).
	Informers int   `json:"informers"`
	Objects   int   `json:"objects"`
	Bytes     int64 `json:"bytes"`
}

// Stats returns Health, with what the cache of each engaged cluster holds.
// It reads every informer's estimate, as the cache's own Stats does: a
// page or a scrape, not a hot path.
func (s *Set) Stats() []Stats {
	hs := s.Health()
	out := make([]Stats, len(hs))
	for i, h := range hs {
		out[i].Health = h
		if h.State != StateReady && h.State != StateUnhealthy {
			continue
		}
		c, err := s.Get(h.Cluster)
		if err != nil {
			continue // disengaged meanwhile
		}
		t := informers.Total(c.Cache().Stats())
		out[i].Informers, out[i].Objects, out[i].Bytes = t.Informers, t.Objects, t.Bytes+c.Cache().SharedBytes()
	}
	return out
}
