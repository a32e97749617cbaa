package informers_test

import (
	"encoding/json"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-dev/converge/informers"
)

// InformerStats is the debug endpoint's JSON of an informer: the kind in
// lower-case keys and the error as its text, read back as an error.
func TestInformerStatsJSON(t *testing.T) {
	st := informers.InformerStats{
		Description: "apps/v1 Deployment", Kind: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		Mode: informers.Metadata, Objects: 3, Bytes: 4096, StartedByRead: true, Relists: 2, Watching: true, Err: errors.New("forbidden"),
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"description":"apps/v1 Deployment","kind":{"group":"apps","version":"v1","kind":"Deployment"},"objects":3,"bytes":4096,"startedByRead":true,"relists":2,"synced":false,"watching":true,"error":"forbidden"}`
	if string(b) != want {
		t.Errorf("JSON\n got %s\nwant %s", b, want)
	}
	var back informers.InformerStats
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Err == nil || back.Err.Error() != "forbidden" || back.Kind != st.Kind || back.Objects != 3 || back.Bytes != 4096 || !back.StartedByRead || back.Relists != 2 || !back.Watching {
		t.Errorf("decoded %+v, want %+v without the mode", back, st)
	}
	if b, _ := json.Marshal(informers.InformerStats{Synced: true}); string(b) != `{"description":"","kind":{"group":"","version":"","kind":""},"objects":0,"bytes":0,"relists":0,"synced":true,"watching":false}` {
		t.Errorf("healthy: %s", b)
	}
}
