package history

import (
	"time"

	"github.com/converge-dev/converge/framework/introspect"
	"github.com/converge-dev/converge/reconcile"
)

// Records returns req's records as the debug endpoint shows them, newest
// first; empty, not nil, when none is kept.
func (h *History) Records(req reconcile.Request) []introspect.ReconcileRecord {
	out := []introspect.ReconcileRecord{}
	for _, r := range h.Of(req) {
		out = append(out, introspect.ReconcileRecord{
			Started:             r.Start,
			DurationSeconds:     r.Took.Seconds(),
			Worker:              r.Worker,
			Reason:              string(r.Reason),
			Result:              r.Result,
			Error:               r.Err,
			RequeueAfterSeconds: r.RequeueAfter.Seconds(),
			Failures:            r.Retries,
			Blocked:             r.Blocked,
		})
	}
	return out
}

// Series returns Recent's buckets and totals as the debug endpoint shows
// them.
func (h *History) Series(now time.Time) ([]introspect.SeriesPoint, introspect.ReconcileTotals) {
	points, total, errs := h.Recent(now)
	series := make([]introspect.SeriesPoint, len(points))
	for i, p := range points {
		sp := introspect.SeriesPoint{Start: time.Unix(0, p.Bucket*int64(SeriesBucket)).UTC(), Reconciles: p.N, Errors: p.Errors}
		if p.N > 0 {
			sp.MeanSeconds = (p.Took / time.Duration(p.N)).Seconds()
		}
		series[i] = sp
	}
	return series, introspect.ReconcileTotals{Reconciles: total, Errors: errs}
}
