package panel

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
)

// kernelBanner says how old the kernel data is; Bad when it is stale or missing.
type kernelBanner struct {
	Known, Stale, Bad bool
	Age               string
	Error             string
	Reason            string
}

func kernelOf(snap *server.Snapshot) *kernelBanner {
	if snap == nil {
		return &kernelBanner{Bad: true, Reason: "the daemon has not read the kernel's table yet (or no daemon runs)."}
	}
	k := &kernelBanner{Known: snap.Table != nil}
	age := time.Since(snap.At)
	k.Age = ageText(age)
	if snap.Err != nil {
		k.Error = snap.Err.Error()
	}
	if !k.Known {
		k.Bad, k.Reason = true, "the kernel's IPVS table cannot be read: "+k.Error
		return k
	}
	k.Stale = age > 2*server.PollInterval || snap.Err != nil
	k.Bad = k.Stale
	return k
}

// ageText is how old a snapshot is, as the pages say it.
func ageText(age time.Duration) string { return strconv.FormatFloat(age.Seconds(), 'f', 1, 64) + " s" }

// newPage starts a page for the user; it looks up their draft (admins only
// stage) and the kernel's freshness.
func (p *Panel) newPage(ctx context.Context, r *http.Request, u who, title, nav string) *page {
	key := p.core.KeyNow()
	return &page{Title: title, Nav: nav, Who: u, Kernel: kernelOf(key.Snap), Draft: p.draftBanner(ctx, u, key)}
}

// draftBanner is the banner about u's draft (nil: none, or not an admin),
// the core's summary: counted once per draft and revision.
func (p *Panel) draftBanner(ctx context.Context, u who, key server.RenderKey) *server.DraftSummary {
	if !u.Can("draft stage") {
		return nil
	}
	rev, err := p.revOf(ctx, key)
	if err != nil {
		return nil
	}
	sum, err := p.core.SummarizeDraft(ctx, u.User, rev)
	if err != nil {
		return nil
	}
	return sum
}

// revOf is the desired revision of a view keyed on key: the one the daemon
// knows (no database read: its own writes at once, another process's once
// its loop has read it), else, without a daemon's snapshot, the store's.
func (p *Panel) revOf(ctx context.Context, key server.RenderKey) (int64, error) {
	if key.Snap != nil {
		return key.Rev, nil
	}
	return p.core.CurrentRevision(ctx)
}

func (p *Panel) renderError(w http.ResponseWriter, r *http.Request, u who, status int, msg string) {
	pg := &page{Title: http.StatusText(status), Who: u, Errors: []string{msg}}
	p.render(w, r, status, "error", pg)
}

// fail renders an error from the core as the error page, with the HTTP
// status its code maps to.
func (p *Panel) fail(w http.ResponseWriter, r *http.Request, u who, err error) {
	status := statusOf(err)
	if rl := (*server.RateLimitedError)(nil); errors.As(err, &rl) {
		w.Header().Set("Retry-After", strconv.Itoa(rl.Seconds()))
	}
	if status >= 500 {
		p.log.Error("panel request failed", "path", r.URL.Path, "err", err)
	}
	p.renderError(w, r, u, status, err.Error())
}

func statusOf(err error) int { return server.HTTPStatus(server.CodeOf(err)) }

const flashCookie = "ipvsctl_flash"

// redirect answers a POST that worked: a message for the next page, then 303.
func redirect(w http.ResponseWriter, r *http.Request, to, msg string) {
	if msg != "" {
		http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: url.QueryEscape(msg), Path: "/", MaxAge: 60,
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// takeFlash reads and clears the message a redirect left.
func takeFlash(w http.ResponseWriter, r *http.Request) string {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return ""
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	msg, _ := url.QueryUnescape(c.Value)
	if len(msg) > 500 {
		msg = msg[:500]
	}
	return msg
}

// writeSummary is one line about a write: the revision and the kernel work.
func writeSummary(what string, res *server.WriteResult) string {
	if res == nil {
		return what
	}
	s := what
	if res.Changed {
		s += ": revision " + itoa64(res.Revision)
	} else {
		s += ": nothing changed (revision " + itoa64(res.Revision) + ")"
	}
	if n := len(res.Changes); n > 0 {
		s += ", " + itoa(n) + " kernel change"
		if n != 1 {
			s += "s"
		}
	}
	if n := len(res.Failures); n > 0 {
		s += "; " + itoa(n) + " FAILED: " + res.Failures[0].Change + ": " + res.Failures[0].Err
	}
	if n := len(res.Retiring); n > 0 {
		s += "; " + itoa(n) + " real server(s) draining"
	}
	return s
}

func itoa64(n int64) string { return itoa(int(n)) }

// form is a submitted form's values and the errors beside its fields.
type form struct {
	Values map[string]string
	Multi  map[string][]string
	Errs   map[string]string
	Top    []string // problems that name no field of this form
}

func newForm() *form {
	return &form{Values: map[string]string{}, Multi: map[string][]string{}, Errs: map[string]string{}}
}

func (f *form) V(name string) string { return f.Values[name] }

func (f *form) Has(name, value string) bool { return contains(f.Multi[name], value) }

func (f *form) Invalid() bool { return len(f.Errs) > 0 || len(f.Top) > 0 }

func (f *form) set(name, msg string) {
	if _, ok := f.Errs[name]; !ok {
		f.Errs[name] = msg
	}
}

// problemPrefix strips the document path of the object a form edits.
var problemPrefix = regexp.MustCompile(`^(services\[\d+\]\.)?(servers\[\d+\]\.)?`)

// fieldOf is the form field a problem's path names: services[3].port ->
// port; services[0].match[1].ports[0] -> match; servers[2].weight -> weight;
// services[0].check.expect_status[1] -> check_expect_status.
func fieldOf(path string, serverForm bool) string {
	if rest, ok := strings.CutPrefix(path, "settings."); ok {
		return rest
	}
	loc := problemPrefix.FindStringSubmatchIndex(path)
	rest := path[loc[1]:]
	if serverForm && loc[4] < 0 && strings.HasPrefix(path, "services[") {
		return "" // a service field in a server form
	}
	if !serverForm && loc[4] >= 0 {
		return ""
	}
	for _, obj := range []string{"check.", "sorry_server."} {
		if leaf, ok := strings.CutPrefix(rest, obj); ok {
			return strings.TrimSuffix(obj, ".") + "_" + fieldOf(leaf, false)
		}
	}
	if i := strings.IndexAny(rest, "[."); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// takeErr puts a core error beside the fields it names; what names no field
// of the form goes on top. It reports whether err was a validation error.
func (f *form) takeErr(err error, serverForm bool, fields []string) {
	var ve *ipvsmgr.ValidationError
	if errors.As(err, &ve) {
		for _, pr := range ve.Problems {
			name := fieldOf(pr.Field, serverForm)
			if name != "" && contains(fields, name) {
				f.set(name, pr.Message)
			} else {
				f.Top = append(f.Top, pr.Error())
			}
		}
		return
	}
	f.Top = append(f.Top, err.Error())
}

// staleRevision is a revision that moved the state under a form or draft.
type staleRevision struct {
	server.Revision
	Changes []string
}

// since lists the revisions after base (newest last), at most 20.
func (p *Panel) since(ctx context.Context, base int64) []staleRevision {
	revs, err := p.core.History(ctx, 20)
	if err != nil {
		return nil
	}
	var out []staleRevision
	for i := len(revs) - 1; i >= 0; i-- {
		if revs[i].ID <= base {
			continue
		}
		d, err := p.core.Revision(ctx, revs[i].ID)
		if err != nil {
			continue
		}
		out = append(out, staleRevision{Revision: revs[i], Changes: d.Changes})
	}
	return out
}
