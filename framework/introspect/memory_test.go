package introspect_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/informers"
)

// fixedProvider serves a State of informers only.
type fixedProvider struct{ stats []informers.InformerStats }

func (p fixedProvider) State(now time.Time) introspect.State {
	return introspect.State{Time: now, Informers: p.stats, Memory: introspect.MemoryOf(p.stats, 2048), Webhooks: []string{}}
}
func (fixedProvider) Controllers() []introspect.Controller   { return nil }
func (p fixedProvider) Informers() []informers.InformerStats { return p.stats }

var (
	configMaps = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	secrets    = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
)

var memoryStats = []informers.InformerStats{
	{Description: "v1 ConfigMap in namespace a", Kind: configMaps, Objects: 10, Bytes: 30 << 10, Synced: true},
	{Description: "v1 ConfigMap in namespace b", Kind: configMaps, Objects: 5, Bytes: 10 << 10, Synced: true},
	{Description: "v1 Secret", Kind: secrets, Objects: 2000, Bytes: 3 << 20, Synced: true, StartedByRead: true},
	{Description: "v1 Secret (metadata)", Kind: secrets, Err: errors.New("secrets is forbidden")},
}

// The per-kind totals sum the kind's informers, largest kind first, and
// the cache's estimate is the informers' plus the shared values'.
func TestMemoryOfTotalsPerKind(t *testing.T) {
	m := introspect.MemoryOf(memoryStats, 2048)
	if len(m.Kinds) != 2 {
		t.Fatalf("kinds %+v, want ConfigMap and Secret", m.Kinds)
	}
	sec, cms := m.Kinds[0], m.Kinds[1]
	if sec.Kind.Kind != "Secret" || sec.Informers != 2 || sec.Objects != 2000 || sec.Bytes != 3<<20 || sec.StartedByRead != 1 {
		t.Errorf("first kind %+v, want the Secrets' two informers, 2000 objects, 3 MiB, one started by a read", sec)
	}
	if cms.Kind.Kind != "ConfigMap" || cms.Informers != 2 || cms.Objects != 15 || cms.Bytes != 40<<10 || cms.StartedByRead != 0 {
		t.Errorf("second kind %+v, want the ConfigMaps' two informers, 15 objects, 40 KiB", cms)
	}
	if want := int64(3<<20 + 40<<10 + 2048); m.CacheBytes != want {
		t.Errorf("CacheBytes %d, want %d", m.CacheBytes, want)
	}
	if m.LiveHeapBytes <= 0 || m.UnattributedBytes != max(m.LiveHeapBytes-m.CacheBytes, 0) {
		t.Errorf("live heap %d, unattributed %d: want a live heap and the rest of it", m.LiveHeapBytes, m.UnattributedBytes)
	}
}

func get(t *testing.T, srv *httptest.Server, path string) string {
	t.Helper()
	res, err := http.Get(srv.URL + introspect.Path + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, res.StatusCode, b)
	}
	return string(b)
}

// The page shows each informer's bytes, flags the one a read started,
// shows a failing one's error, the per-kind totals and the process line;
// the JSON carries the same.
func TestPageShowsMemory(t *testing.T) {
	srv := httptest.NewServer(introspect.Handler(fixedProvider{memoryStats}, logr.Discard()))
	defer srv.Close()
	page := get(t, srv, "")
	for _, re := range []string{
		`<tr class="informer-row"><td>v1 ConfigMap in namespace a</td><td class="num">10</td><td class="num bytes">30.0 KiB</td>`,
		`<tr class="informer-row" data-started-by-read><td>v1 Secret <span class="warn flag"[^>]*>started by a read</span></td><td class="num">2000</td><td class="num bytes">3.0 MiB</td>`,
		`<span class="bad">secrets is forbidden</span>`,
		`<tr class="kind-total" data-kind="v1 Secret"><td>v1 Secret <span class="warn flag">1 started by a read</span></td><td class="num">2</td><td class="num">2000</td><td class="num bytes">3.0 MiB</td>`,
		`<tr class="kind-total" data-kind="v1 ConfigMap"><td>v1 ConfigMap</td><td class="num">2</td><td class="num">15</td><td class="num bytes">40.0 KiB</td>`,
		`heap: <b class="live">[0-9.]+ [KMG]iB</b> live · cache estimate <b class="cache">3.0 MiB</b> \(shared values 2.0 KiB\) · unattributed <b class="rest">[0-9.]+ [KMG]?i?B</b>`,
		`</footer>`,
	} {
		if !regexp.MustCompile(re).MatchString(page) {
			t.Errorf("the page lacks %s:\n%s", re, page)
		}
	}

	var state struct {
		Informers []struct {
			Description   string `json:"description"`
			Bytes         int64  `json:"bytes"`
			StartedByRead bool   `json:"startedByRead"`
		} `json:"informers"`
		Memory introspect.Memory `json:"memory"`
	}
	if err := json.Unmarshal([]byte(get(t, srv, "api/state")), &state); err != nil {
		t.Fatal(err)
	}
	if len(state.Informers) != 4 || state.Informers[2].Bytes != 3<<20 || !state.Informers[2].StartedByRead || state.Informers[0].StartedByRead {
		t.Errorf("JSON informers %+v, want each one's bytes and the Secrets' flagged", state.Informers)
	}
	if len(state.Memory.Kinds) != 2 || state.Memory.CacheBytes != 3<<20+40<<10+2048 || state.Memory.LiveHeapBytes == 0 {
		t.Errorf("JSON memory %+v, want two kinds, the cache's estimate and the live heap", state.Memory)
	}
}
