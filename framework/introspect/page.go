package introspect

import (
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/converge-dev/converge/reconcile"
)

// debugUI holds the page template, its script and its style sheet: the
// page loads nothing from outside the process.
//
//go:embed debugui
var debugUI embed.FS

// debugPage parses the page template on the first request: most
// processes never serve the page, and parsing it when the package is
// initialised would cost each of them the parser's memory and code pages.
var debugPage = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("page.html").Funcs(template.FuncMap{
		"spark": sparkline,
		"age":   func(sec float64) string { return age(time.Duration(sec * float64(time.Second))) },
		"ago":   func(now, t time.Time) string { return ago(now, t) },
		"until": func(now, t time.Time) string { return age(t.Sub(now)) },
		"clock": func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
		"plus":  func(t time.Time, sec float64) time.Time { return t.Add(time.Duration(sec * float64(time.Second))) },
		"words": reasonWords,
		"bytes": bytesText,
		"explainURL": func(controller, namespace, name string) string {
			k := name
			if namespace != "" {
				k = namespace + "/" + name
			}
			return "?" + url.Values{"controller": {controller}, "key": {k}}.Encode()
		},
		"rate": func(s ControllerStatus) string {
			return fmt.Sprintf("%.1f/s", lastMinute(s.Series, func(p SeriesPoint) float64 { return float64(p.Reconciles) })/60)
		},
		"errrate": func(s ControllerStatus) string {
			return fmt.Sprintf("%.1f/s", lastMinute(s.Series, func(p SeriesPoint) float64 { return float64(p.Errors) })/60)
		},
	}).ParseFS(debugUI, "debugui/page.html"))
})

// pageData is what the page template renders.
type pageData struct {
	Now   time.Time
	State State
	// Controller and Key are the search; Status is the key's state in
	// that controller and Lines its explanation, when one was searched.
	Controller, Key string
	Status          *KeyStatus
	Lines           []string
	Converged       bool
	Problem         string
	// NotConverged lists, per controller that has any, a page of its keys
	// that are not converged; the page of controller List starts at
	// Offset, the others at 0.
	NotConverged []notConvergedList
	List         string
	Offset       int
}

// notConvergedList is one controller's page of keys not converged on the
// page, with the links to the pages of newer and older keys (empty at an
// end).
type notConvergedList struct {
	NotConvergedPage
	// From and To count the keys shown, from 1.
	From, To     int
	Newer, Older string
}

// pageRows is how many keys not converged the page lists per controller.
const pageRows = 20

// servePage renders the page: the controllers, and the key searched with
// ?controller=C&key=NAMESPACE/NAME. Its script fetches the same URL every
// two seconds and swaps in the live parts.
func (m handler) servePage(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	d := pageData{Now: now.UTC(), State: m.p.State(now)}
	q := r.URL.Query()
	d.Controller, d.Key = q.Get("controller"), strings.TrimSpace(q.Get("key"))
	d.List = q.Get("list")
	if n, err := intParam(q.Get("offset"), 0, "offset"); err == nil {
		d.Offset = n
	}
	if d.Controller == "" && len(d.State.Controllers) > 0 {
		d.Controller = d.State.Controllers[0].Name
	}
	if d.Key != "" {
		req := reconcile.Request{Name: d.Key}
		if ns, name, ok := strings.Cut(d.Key, "/"); ok {
			req = reconcile.Request{Namespace: ns, Name: name}
		}
		c := m.controllerNamed(d.Controller)
		switch {
		case req.Name == "" || len(req.Name) > maxNameLength || len(req.Namespace) > maxNameLength:
			d.Problem = "a key is NAMESPACE/NAME, or NAME for a cluster-scoped object"
		case c == nil:
			d.Problem = fmt.Sprintf("no controller named %q in this manager", d.Controller)
		default:
			s := c.Key(req, now)
			d.Status = &s
			d.Lines, d.Converged = s.Explain(now)
		}
	}
	for _, c := range m.p.Controllers() {
		offset := 0
		if c.Name() == d.List {
			offset = d.Offset
		}
		p := notConverged(c, offset, pageRows, now)
		if p.Total == 0 {
			continue
		}
		if offset >= p.Total { // past the end, as the list shrank: its last page
			offset = (p.Total - 1) / pageRows * pageRows
			p = notConverged(c, offset, pageRows, now)
		}
		l := notConvergedList{NotConvergedPage: p, From: min(offset+1, p.Total), To: offset + len(p.Keys)}
		link := func(offset int) string {
			v := url.Values{"list": {c.Name()}, "offset": {strconv.Itoa(offset)}}
			if d.Key != "" {
				v.Set("controller", d.Controller)
				v.Set("key", d.Key)
			}
			return "?" + v.Encode()
		}
		if offset > 0 {
			l.Newer = link(max(offset-pageRows, 0))
		}
		if offset+pageRows < p.Total {
			l.Older = link(offset + pageRows)
		}
		d.NotConverged = append(d.NotConverged, l)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := debugPage().Execute(w, d); err != nil {
		m.log.V(1).Info("debug page not rendered", "error", err.Error())
	}
}

// serveStatic serves the page's script and style sheet.
func serveStatic(w http.ResponseWriter, r *http.Request) {
	var ctype string
	switch name := r.PathValue("file"); name {
	case "page.js":
		ctype = "text/javascript; charset=utf-8"
	case "page.css":
		ctype = "text/css; charset=utf-8"
	default:
		writeError(w, http.StatusNotFound, "no such file "+name)
		return
	}
	b, err := debugUI.ReadFile("debugui/" + r.PathValue("file"))
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", ctype)
	_, _ = w.Write(b)
}

// lastMinute sums f over the last twelve buckets (one minute).
func lastMinute(series []SeriesPoint, f func(SeriesPoint) float64) float64 {
	sum := 0.0
	for _, p := range series[max(len(series)-12, 0):] {
		sum += f(p)
	}
	return sum
}

// sparkline draws one value of every bucket as an inline SVG polyline
// scaled to its maximum: "reconciles", "errors" or "latency".
func sparkline(series []SeriesPoint, what string) template.HTML {
	const w, h = 120.0, 24.0
	vals := make([]float64, len(series))
	top := 0.0
	for i, p := range series {
		switch what {
		case "errors":
			vals[i] = float64(p.Errors)
		case "latency":
			vals[i] = p.MeanSeconds
		default:
			vals[i] = float64(p.Reconciles)
		}
		top = max(top, vals[i])
	}
	var pts strings.Builder
	for i, v := range vals {
		x := w * float64(i) / float64(max(len(vals)-1, 1))
		y := h - 1
		if top > 0 {
			y = h - 1 - (h-2)*v/top
		}
		fmt.Fprintf(&pts, "%.1f,%.1f ", x, y)
	}
	// Only numbers go into the markup, so it needs no escaping.
	return template.HTML(fmt.Sprintf(`<svg class="spark %s" viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" role="img" aria-label="%s, last 5 minutes"><polyline fill="none" stroke-width="1.5" points="%s"/></svg>`,
		what, w, h, w, h, what, strings.TrimSpace(pts.String()))) //nolint:gosec // numbers and a fixed class only
}
