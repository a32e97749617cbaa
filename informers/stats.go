package informers

import (
	"encoding/json"
	"errors"
	"sort"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// InformerStats describes one informer of the cache. Its JSON, an
// informer on the manager's debug endpoint, spells Kind in lower-case keys
// ("group", "version", "kind") and Err as its text ("error"), and leaves
// Mode out; decoded, Err holds that text only.
type InformerStats struct {
	// Description names the informer: kind, and namespace and selectors if any.
	Description string
	// Kind is the informer's kind and Mode how it stores objects.
	Kind schema.GroupVersionKind
	Mode Mode
	// Objects is the number of objects it holds (counted as its events
	// are handed to listeners, so it may lag the store by a few); Relists
	// how often it listed.
	Objects int
	Relists int64
	// Bytes estimates the heap bytes of its objects and its store, without
	// the values the cache shares between objects (Cache.SharedBytes):
	// Objects times the mean size of a sample of them (every 32nd object
	// stored, the first included, measured by a walk of its fields that
	// rounds each allocation to the Go allocator's size class), plus the
	// store's map and indexes.
	Bytes int64
	// StartedByRead is set when a read of a kind no informer held (a
	// Cache.Get or List, or a KindReader's) started the informer, rather
	// than For or ForObject (the framework's controllers use those).
	StartedByRead bool
	// Synced reports whether it has listed its objects once.
	Synced bool
	// Watching reports whether the informer's last list or watch request
	// opened a watch stream and no request has started since. It is false
	// while the informer lists, and while a watch request is being sent
	// again: client-go retries a watch request whose connection was
	// refused or reset, about once a second for up to ten attempts, before
	// the informer sees an error (and Err says so). An informer that is
	// not watching receives no events, however healthy Err says it is.
	Watching bool
	// Err is nil while it is healthy; otherwise a *SyncError saying why it
	// has not synced or why its last list or watch failed.
	Err error
	// ServerSharded reports whether the API server applies the informer's
	// shard selector (Selection.Shard); false when the informer filters
	// objects itself, or has no shard selector, or has not asked yet.
	ServerSharded bool
}

// informerStatsJSON is InformerStats as JSON.
type informerStatsJSON struct {
	Description string `json:"description"`
	Kind        struct {
		Group   string `json:"group"`
		Version string `json:"version"`
		Kind    string `json:"kind"`
	} `json:"kind"`
	Objects       int    `json:"objects"`
	Bytes         int64  `json:"bytes"`
	StartedByRead bool   `json:"startedByRead,omitempty"`
	Relists       int64  `json:"relists"`
	Synced        bool   `json:"synced"`
	Watching      bool   `json:"watching"`
	Error         string `json:"error,omitempty"`
	ServerSharded bool   `json:"serverSharded,omitempty"`
}

// MarshalJSON encodes s as the debug endpoint serves it.
func (s InformerStats) MarshalJSON() ([]byte, error) {
	j := informerStatsJSON{Description: s.Description, Objects: s.Objects, Bytes: s.Bytes, StartedByRead: s.StartedByRead,
		Relists: s.Relists, Synced: s.Synced, Watching: s.Watching, ServerSharded: s.ServerSharded}
	j.Kind.Group, j.Kind.Version, j.Kind.Kind = s.Kind.Group, s.Kind.Version, s.Kind.Kind
	if s.Err != nil {
		j.Error = s.Err.Error()
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes what MarshalJSON encodes; Err holds the error's
// text only.
func (s *InformerStats) UnmarshalJSON(b []byte) error {
	var j informerStatsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = InformerStats{Description: j.Description, Kind: schema.GroupVersionKind{Group: j.Kind.Group, Version: j.Kind.Version, Kind: j.Kind.Kind},
		Objects: j.Objects, Bytes: j.Bytes, StartedByRead: j.StartedByRead, Relists: j.Relists, Synced: j.Synced, Watching: j.Watching, ServerSharded: j.ServerSharded}
	if j.Error != "" {
		s.Err = errors.New(j.Error)
	}
	return nil
}

// Stats describes every informer of the cache, sorted by description. It
// takes time linear in the number of informers, not of objects.
func (c *Cache) Stats() []InformerStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	started := c.runCtx != nil
	out := make([]InformerStats, 0, len(c.entries))
	for _, e := range c.entries {
		out = append(out, e.stats(started))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Description < out[j].Description })
	return out
}

// stats describes e; started says whether the cache runs.
func (e *entry) stats(started bool) InformerStats {
	n := e.len()
	return InformerStats{
		Description: e.desc, Kind: e.key.gvk, Mode: e.key.mode,
		Objects: n, Bytes: e.bytes(n), StartedByRead: e.startedByRead, Relists: e.lists.Load(),
		Synced: e.informer.HasSynced(), Watching: e.watching.Load(), Err: e.health(started),
		ServerSharded: e.serverSharded.Load(),
	}
}
