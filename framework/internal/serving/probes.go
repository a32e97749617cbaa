package serving

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// ProbeHandler serves a set of named checks the way kube-apiserver's own
// /healthz does: 200 "ok", or 503 listing each check; ?verbose lists them
// either way. checks is called once per request and returns the checks to
// run, by name (a nil error means healthy).
func ProbeHandler(checks func() map[string]func(*http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		all := checks()
		names := make([]string, 0, len(all))
		for n := range all {
			names = append(names, n)
		}
		sort.Strings(names)
		var b strings.Builder
		failed := false
		for _, n := range names {
			if err := all[n](r); err != nil {
				failed = true
				fmt.Fprintf(&b, "[-]%s failed: %v\n", n, err)
			} else {
				fmt.Fprintf(&b, "[+]%s ok\n", n)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		switch {
		case failed:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, b.String(), "check failed\n")
		case r.URL.Query().Has("verbose"):
			fmt.Fprint(w, b.String(), "ok\n")
		default:
			fmt.Fprint(w, "ok")
		}
	})
}
