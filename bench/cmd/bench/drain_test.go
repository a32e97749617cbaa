package main

import (
	"strings"
	"testing"
)

func TestParseDrainCounters(t *testing.T) {
	body := []byte(`# HELP apiserver_terminated_watchers_total x
apiserver_terminated_watchers_total{group="",resource="configmaps"} 4
apiserver_terminated_watchers_total{group="",resource="secrets"} 9
apiserver_terminated_watchers_total{group="bench.converge.dev",resource="configmaps"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="cluster",subresource="",verb="LIST",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="WATCH",version="v1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="PATCH",version="v1"} 10000
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="secrets",scope="namespace",subresource="",verb="LIST",version="v1"} 8
apiserver_watch_list_duration_seconds_count{group="",resource="configmaps",scope="namespace",version="v1"} 2
apiserver_watch_list_duration_seconds_count{group="",resource="pods",scope="namespace",version="v1"} 6
watch_cache_capacity{group="",resource="configmaps"} 16384
watch_cache_capacity{group="",resource="secrets"} 100
`)
	d := parseDrainCounters(body)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"terminated: core ConfigMaps only", d.terminated, 4},
		{"lists: LISTs of every scope and watch-lists, not WATCH or PATCH", d.lists, 3 + 1 + 2},
		{"watch cache capacity", d.capacity, 16384},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

// A round counts only when both stopped watchers were terminated and no
// list of ConfigMaps came in; drainRound says why not, and summarizeDrain
// leaves such rounds out.
func TestSummarizeDrainOnlyValidRounds(t *testing.T) {
	round := func(r int, first string, cc, cg float64, valid bool) *DrainRound {
		return &DrainRound{Workers: 2, Round: r, First: first, Converge: DrainDrain{PerSec: cc, CPUPerEvUs: 20}, ClientGo: DrainDrain{PerSec: cg, CPUPerEvUs: 30},
			Ratio: cc / cg, Valid: valid}
	}
	valid := []*DrainRound{
		round(0, "converge", 200, 100, true),
		round(1, "client-go", 150, 100, true),
		round(2, "converge", 90, 100, true),
	}
	s := summarizeDrain(DrainSet{Workers: 2, InvalidAttempts: 1}, valid, "")
	if s.Stats.Pairs != 3 || s.Stats.Wins != 2 || s.Stats.Median != 1.5 {
		t.Errorf("stats %+v; want 3 pairs, 2 wins, median r 1.5", s.Stats)
	}
	if s.ConvergeFirstN != 2 || s.ClientGoFirstN != 1 || s.ConvergeFirstR != (2+0.9)/2 || s.ClientGoFirstR != 1.5 {
		t.Errorf("order effect: converge first %v (%d), client-go first %v (%d); want 1.45 (2), 1.5 (1)",
			s.ConvergeFirstR, s.ConvergeFirstN, s.ClientGoFirstR, s.ClientGoFirstN)
	}
	if s.ConvergePerSec != 150 || s.ClientGoPerSec != 100 || s.ConvergeCPUPerEvUs != 20 || s.ClientGoCPUPerEvUs != 30 {
		t.Errorf("medians %v %v %v %v; want 150, 100, 20, 30", s.ConvergePerSec, s.ClientGoPerSec, s.ConvergeCPUPerEvUs, s.ClientGoCPUPerEvUs)
	}
	sum := &DrainSummary{Command: "make bench", Objects: 10, Sets: []DrainSet{s},
		Runs: append([]*DrainRound{{Round: 0, Why: "only 1 watchers of ConfigMaps terminated"}}, valid...)}
	md := renderDrain(sum)
	for _, want := range []string{"| 2 | 3 | 2/3 | 0.500 | 1.500 |", "no: only 1 watchers of ConfigMaps terminated", "too few rounds for a 90 % interval"} {
		if !strings.Contains(md, want) {
			t.Errorf("drain.md lacks %q:\n%s", want, md)
		}
	}
	if svg := renderDrainChart(sum); strings.Count(svg, "<circle") != 2*len(valid) {
		t.Errorf("the chart has %d dots; want two per valid round (%d)", strings.Count(svg, "<circle"), 2*len(valid))
	}
}

func TestWorkerCounts(t *testing.T) {
	var w workerCounts
	if err := w.Set("1, 2,4"); err != nil || w.String() != "1,2,4" {
		t.Errorf("Set(1, 2,4) = %v, %v", w, err)
	}
	for _, bad := range []string{"", "0", "two", "1,,2"} {
		if err := w.Set(bad); err == nil {
			t.Errorf("Set(%q) took it", bad)
		}
	}
}

// One write feeds every pair: a round counts only if the watchers of all
// the stopped processes were terminated, two per pair.
func TestJudgeWantsTwoTerminatedWatchersPerPair(t *testing.T) {
	o := drainOpts{history: drainHistory}
	round := func(pairs int, terminated float64) *DrainRound {
		rd := &DrainRound{Pairs: pairs, Terminated: terminated, WriteSeconds: 200,
			Converge: DrainDrain{PerSec: 200}, ClientGo: DrainDrain{PerSec: 100}}
		rd.judge(o)
		return rd
	}
	if rd := round(3, 6); !rd.Valid || rd.Ratio != 2 {
		t.Errorf("3 pairs, 6 terminated: valid %v (%s), r %v; want valid, r 2", rd.Valid, rd.Why, rd.Ratio)
	}
	if rd := round(3, 5); rd.Valid || !strings.Contains(rd.Why, "only 5 watchers of ConfigMaps terminated (want the 6 stopped ones)") {
		t.Errorf("3 pairs, 5 terminated: valid %v, why %q; want not valid, naming 5 of 6", rd.Valid, rd.Why)
	}
	rd := &DrainRound{Pairs: 1, Terminated: 2, WriteSeconds: 400, Converge: DrainDrain{PerSec: 200, Lists: 1}, ClientGo: DrainDrain{PerSec: 100}}
	rd.judge(o)
	if rd.Valid || !strings.Contains(rd.Why, "converge's drain saw 1 ConfigMap lists") || !strings.Contains(rd.Why, "within 5m15s") {
		t.Errorf("a relist after 400 s of writes: valid %v, why %q; want not valid, naming the list and the 315 s window", rd.Valid, rd.Why)
	}
}
