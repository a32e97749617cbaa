package main

import "testing"

func TestParseRequests(t *testing.T) {
	body := []byte(`# HELP apiserver_request_total x
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"} 3
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="PUT",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="namespace",subresource="",verb="PUT",version="v1"} 7
apiserver_watch_list_duration_seconds_count{group="",resource="configmaps",scope="namespace",version="v1"} 2
apiserver_watch_list_duration_seconds_count{group="",resource="configmaps",scope="resource",version="v1"} 1
apiserver_response_sizes_sum{component="apiserver",group="",resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"} 1000
apiserver_response_sizes_sum{component="apiserver",group="",resource="configmaps",scope="namespace",subresource="",verb="WATCH",version="v1"} 500
apiserver_watch_events_sizes_sum{group="",resource="configmaps",version="v1"} 250
`)
	rc := parseRequests(body)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"configmaps LIST", rc.byResource["configmaps LIST"], 3},
		{"configmaps PUT", rc.byResource["configmaps PUT"], 2},
		{"leases are not counted", rc.byResource["leases PUT"], 0},
		{"conflicts", rc.conflicts, 2},
		{"streaming lists, every scope", rc.watchLists["configmaps"], 3},
		{"bytes: LIST responses and watch events, not WATCH responses", rc.sentBytes["configmaps"], 1250},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}
