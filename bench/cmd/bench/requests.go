package main

import (
	"bufio"
	"bytes"
	"context"
	"strconv"
	"strings"
)

// requestResources are the resources whose requests the parents workload
// counts: the parents (and their status), both kinds of child, and Events.
var requestResources = map[string]bool{"apps": true, "configmaps": true, "deployments": true, "events": true}

// requestVerbs are the verbs apiserver_request_total reports, in table order.
// APPLY is a server-side apply (a PATCH of type apply); WATCH counts a watch
// when it ends.
var requestVerbs = []string{"GET", "LIST", "WATCH", "POST", "PUT", "PATCH", "APPLY", "DELETE"}

// writeVerbs are the verbs that write.
var writeVerbs = []string{"POST", "PUT", "PATCH", "APPLY", "DELETE"}

// requestCounts is a snapshot of kube-apiserver's apiserver_request_total for
// requestResources: per verb, and the requests answered 409 Conflict.
type requestCounts struct {
	byVerb     map[string]float64
	byResource map[string]float64 // "resource[/subresource] VERB"
	conflicts  float64
	// watchLists are the streaming lists (watches with sendInitialEvents)
	// whose initial events were all sent, by resource: what
	// apiserver_watch_list_duration_seconds counts. Such a list shows in
	// apiserver_request_total only as a WATCH, once the watch ends.
	watchLists map[string]float64
	// sentBytes are the bytes of LIST responses and of watch events
	// (the initial events of streaming lists included) kube-apiserver
	// sent, by resource: apiserver_response_sizes_sum of verb LIST and
	// apiserver_watch_events_sizes_sum.
	sentBytes map[string]float64
}

// scrapeRequests reads kube-apiserver's /metrics with the driver's (admin)
// credentials.
func (c *cluster) scrapeRequests(ctx context.Context) (requestCounts, error) {
	body, err := c.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return requestCounts{}, err
	}
	return parseRequests(body), nil
}

// parseRequests sums the apiserver_request_total series of requestResources,
// and the streaming lists and bytes sent of every resource, in a Prometheus
// text exposition.
func parseRequests(body []byte) requestCounts {
	rc := requestCounts{byVerb: map[string]float64{}, byResource: map[string]float64{}, watchLists: map[string]float64{}, sentBytes: map[string]float64{}}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	const prefix = "apiserver_request_total{"
	// others are the other series read: where each goes, by its labels.
	others := map[string]func(labels map[string]string, v float64){
		"apiserver_watch_list_duration_seconds_count{": func(l map[string]string, v float64) { rc.watchLists[l["resource"]] += v },
		"apiserver_response_sizes_sum{": func(l map[string]string, v float64) {
			if l["verb"] == "LIST" {
				rc.sentBytes[l["resource"]] += v
			}
		},
		"apiserver_watch_events_sizes_sum{": func(l map[string]string, v float64) { rc.sentBytes[l["resource"]] += v },
	}
	for sc.Scan() {
		line := sc.Text()
		if open := strings.IndexByte(line, '{'); open > 0 && others[line[:open+1]] != nil {
			if end := strings.LastIndexByte(line, '}'); end > open {
				if v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64); err == nil {
					others[line[:open+1]](parseLabels(line[open+1:end]), v)
				}
			}
			continue
		}
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		labels := parseLabels(line[len(prefix):end])
		if !requestResources[labels["resource"]] {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			continue
		}
		rc.byVerb[labels["verb"]] += v
		res := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			res += "/" + sub
		}
		rc.byResource[res+" "+labels["verb"]] += v
		if labels["code"] == "409" {
			rc.conflicts += v
		}
	}
	return rc
}

// parseLabels parses `k="v",k2="v2"` (values without escaped quotes, as
// these are).
func parseLabels(s string) map[string]string {
	m := map[string]string{}
	for s != "" {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			break
		}
		k := s[:eq]
		rest := s[eq+2:]
		q := strings.IndexByte(rest, '"')
		if q < 0 {
			break
		}
		m[k] = rest[:q]
		s = strings.TrimPrefix(rest[q+1:], ",")
	}
	return m
}

// sub returns the requests made between before and c, by verb and by
// resource and verb, less the driver's own: own maps "resource VERB" to how
// many requests the driver sent.
func (c requestCounts) sub(before requestCounts, own map[string]float64) (byVerb, byResource map[string]float64, conflicts float64) {
	byVerb, byResource = map[string]float64{}, map[string]float64{}
	for k, n := range c.byResource {
		x := n - before.byResource[k] - own[k]
		if x == 0 {
			continue
		}
		byResource[k] = x
		byVerb[k[strings.LastIndexByte(k, ' ')+1:]] += x
	}
	return byVerb, byResource, c.conflicts - before.conflicts
}

// writes sums the write verbs of d.
func writes(d map[string]float64) float64 {
	var n float64
	for _, v := range writeVerbs {
		n += d[v]
	}
	return n
}
