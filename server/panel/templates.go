package panel

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/web"
)

// viewPartials lists, per view, the partials it uses besides the layout and
// partials/common.html (miniflux's engine: each view parsed once with only
// what it needs, so two views may define the same block differently).
var viewPartials = map[string][]string{
	"login":        nil,
	"error":        nil,
	"overview":     nil,
	"live":         {"live_rows"},
	"live_rows":    {"live_rows"}, // the fragment the live table polls
	"live_row":     {"live_row"},  // one row of it, rendered once per snapshot
	"services":     nil,
	"service":      {"chart"},
	"service_new":  {"service_fields", "check_fields"},
	"service_edit": {"service_fields", "check_fields"},
	"server_form":  {"check_fields"},
	"server":       {"chart"},
	"address":      nil,
	"settings":     {"alerts_card"},
	"draft":        {"stale"},
	"history":      nil,
	"revision":     nil,
	"why":          nil,
	"realservers":  nil,
	"tuning":       nil,
	"bgp":          {"bgp_body"},
	"users":        nil,
	"audit":        nil,
	"account":      nil,
	"import":       nil,
	"stale":        {"stale"},
	"events":       {"event_rows"},
	"events_rows":  {"event_rows"}, // the fragment the event log polls
}

// fragments are the views that are a partial alone, without a page.
var fragments = map[string]bool{"live_rows": true, "live_row": true, "events_rows": true}

var sortLabels = map[string]string{"name": "configuration order", "state": "state (problems first)", "active": "active connections",
	"cps": "connections/s", "bps": "bytes/s", "pps": "packets/s"}

// views are the panel's templates, each view parsed on its first use: all
// of them parsed are 2.4 MB of heap that a director whose panel nobody
// opens would keep (and the collector's headroom as much again).
type views struct {
	t      map[string]func() (*template.Template, error)
	parsed atomic.Int32 // views parsed so far (tests)
}

// get is view name's template, parsed on its first use.
func (v *views) get(name string) (*template.Template, error) {
	parse := v.t[name]
	if parse == nil {
		return nil, fmt.Errorf("panel: no view %s", name)
	}
	return parse()
}

func parseViews(a *assets) *views {
	funcs := template.FuncMap{
		"asset":    a.url,
		"path":     pathOf,
		"query":    queryWith,
		"num":      fmtNum,
		"bytes":    fmtBytes,
		"rate":     fmtRate,
		"ago":      ago,
		"when":     when,
		"add":      func(a, b int) int { return a + b },
		"join":     strings.Join,
		"contains": func(list []string, s string) bool { return contains(list, s) },
		"dict":     dict,
		"list":     func(s ...string) []string { return s },
		"itoa":     itoa,
		"int":      func(n int64) int { return int(n) },
		"ternary": func(c bool, a, b string) string {
			if c {
				return a
			}
			return b
		},
		"serverID":  server.ServerID,
		"hasText":   strings.Contains,
		"ms":        func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) },
		"sum":       func(a, b uint64) uint64 { return a + b },
		"sortLabel": func(k string) string { return sortLabels[k] },
		"slug":      func(s string) string { return strings.ReplaceAll(s, " ", "-") },
	}
	v := &views{t: make(map[string]func() (*template.Template, error), len(viewPartials))}
	for name, partials := range viewPartials {
		files := []string{"templates/layout.html", "templates/partials/common.html"}
		for _, p := range partials {
			files = append(files, "templates/partials/"+p+".html")
		}
		if !fragments[name] {
			files = append(files, "templates/views/"+name+".html")
		}
		v.t[name] = sync.OnceValues(func() (*template.Template, error) {
			v.parsed.Add(1)
			t, err := template.New(name).Funcs(funcs).ParseFS(web.Templates, files...)
			if err != nil {
				return nil, fmt.Errorf("panel: parse view %s: %w", name, err)
			}
			return t, nil
		})
	}
	return v
}

// page is what every view gets: the layout's data and the view's own.
type page struct {
	Title   string
	Nav     string
	Who     who
	Flash   string
	Errors  []string // shown at the top, in the one place errors go
	Draft   *server.DraftSummary
	Kernel  *kernelBanner
	Data    any
	Refresh string // URL of a fragment the page polls (live table)
	Path    string // the request's path and query
}

// render executes a view into a buffer, then writes it.
func (p *Panel) render(w http.ResponseWriter, r *http.Request, status int, view string, pg *page) {
	p.renderTemplate(w, r, status, view, "layout", pg)
}

func (p *Panel) renderTemplate(w http.ResponseWriter, r *http.Request, status int, view, tmpl string, data any) {
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufPool.Put(buf)
	if err := p.execute(buf, r, view, tmpl, data); err != nil {
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	htmlHeaders(w, status)
	w.Write(buf.Bytes())
}

// renderBytes is a view rendered, for a page shared by many requests.
func (p *Panel) renderBytes(r *http.Request, view, tmpl string, data any) ([]byte, error) {
	var buf bytes.Buffer
	if err := p.execute(&buf, r, view, tmpl, data); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (p *Panel) execute(buf *bytes.Buffer, r *http.Request, view, tmpl string, data any) error {
	t, err := p.views.get(view)
	if err != nil {
		p.log.Error("panel: view", "view", view, "err", err)
		return err
	}
	if pg, ok := data.(*page); ok {
		pg.Path = r.URL.RequestURI()
	}
	if err := t.ExecuteTemplate(buf, tmpl, data); err != nil {
		p.log.Error("panel: render", "view", view, "err", err)
		return err
	}
	return nil
}

func htmlHeaders(w http.ResponseWriter, status int) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
}

// writeHTML writes a shared rendering with this request's values in its holes.
func writeHTML(w http.ResponseWriter, status int, hp *holed, vals []string) {
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufPool.Put(buf)
	buf.Grow(hp.size(vals)) // an upper bound: fill does not allocate
	b := hp.fill(buf.AvailableBuffer(), vals)
	htmlHeaders(w, status)
	w.Write(b)
}

// assets are the static files with their content hash.
type assets struct {
	hash  string // of all files: one URL prefix changes when any does
	files map[string][]byte
}

func loadAssets() (*assets, error) {
	a := &assets{files: map[string][]byte{}}
	h := sha256.New()
	err := fs.WalkDir(web.Static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := web.Static.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "static/")
		a.files[name] = b
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("panel: read assets: %w", err)
	}
	a.hash = hex.EncodeToString(h.Sum(nil))[:12]
	return a, nil
}

func (a *assets) url(name string) (string, error) {
	if _, ok := a.files[name]; !ok {
		return "", fmt.Errorf("no asset %q", name)
	}
	return "/static/" + a.hash + "/" + name, nil
}

// serve answers /static/{hash}/*: immutable under its hash; an old
// hash gets the current file without the long cache.
func (a *assets) serve(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("*") // the rest of the path
	b, ok := a.files[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if ct := mime.TypeByExtension(path.Ext(name)); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	if r.PathValue("hash") == a.hash {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		w.Header().Set("Cache-Control", "no-cache")
	}
	w.Header().Set("ETag", `"`+a.hash+`"`)
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
}

// pathOf joins path segments, escaping each: names may hold '/' or '?'.
func pathOf(segs ...any) string {
	var b strings.Builder
	for _, s := range segs {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(fmt.Sprint(s)))
	}
	return b.String()
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// queryWith is the URL q with key set to value (or removed when value is "").
func queryWith(base string, q url.Values, kv ...string) string {
	n := url.Values{}
	for k, v := range q {
		n[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			n.Del(kv[i])
		} else {
			n.Set(kv[i], kv[i+1])
		}
	}
	if e := n.Encode(); e != "" {
		return base + "?" + e
	}
	return base
}

func dict(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[fmt.Sprint(kv[i])] = kv[i+1]
	}
	return m
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func fmtNum(v any) string {
	var n uint64
	switch x := v.(type) {
	case int:
		if x < 0 {
			return "-" + fmtNum(-x)
		}
		n = uint64(x)
	case int64:
		if x < 0 {
			return "-" + fmtNum(-x)
		}
		n = uint64(x)
	case uint32:
		n = uint64(x)
	case uint64:
		n = x
	case float64:
		n = uint64(x + 0.5)
	default:
		return fmt.Sprint(v)
	}
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func fmtBytes(v uint64) string {
	f := float64(v)
	for _, u := range []string{"B", "KB", "MB", "GB", "TB"} {
		if f < 1000 || u == "TB" {
			if u == "B" {
				return fmt.Sprintf("%d B", v)
			}
			return fmt.Sprintf("%.1f %s", f, u)
		}
		f /= 1000
	}
	return ""
}

// fmtRate is a per-second rate, short: 950, 12.3k, 4.1M.
func fmtRate(v uint64) string {
	f := float64(v)
	switch {
	case f < 1000:
		return fmt.Sprintf("%d", v)
	case f < 1e6:
		return fmt.Sprintf("%.1fk", f/1e3)
	case f < 1e9:
		return fmt.Sprintf("%.1fM", f/1e6)
	}
	return fmt.Sprintf("%.1fG", f/1e9)
}

func ago(t time.Time) string { return agoAt(t, time.Now()) }

// agoAt is how long before now t was, in words.
func agoAt(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%d s ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%.1f h ago", d.Hours())
	}
	return fmt.Sprintf("%d days ago", int(d.Hours()/24))
}

func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}
