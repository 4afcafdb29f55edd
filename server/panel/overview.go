package panel

import (
	"net/http"
	"sync"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
)

type overviewData struct {
	T          totals
	Health     healthTotals
	Rev        int64
	Foreign    int
	Kernel     *kernelBanner
	Started    time.Time
	Reconcile  *server.ReconcileReport
	Daemon     bool
	Problems   []*svcRow // the first few services with a problem
	MoreProbs  int
	PrepIssues int
	Tuning     *tuningBadge // set when a setting is far off
	BGP        *bgpCard     // set in BGP mode
	Events     []eventRow   // the newest few, newest first
	// How old things are, as of the request (holes of a shared rendering).
	Age, StartedAgo, ReconcileAgo string
}

// The overview is rendered once per (what the daemon knows, the viewer's
// role and draft banner) and shared by every user who sees it alike; the
// user's name and how old things are go in its holes, per request. A flash
// message (once, after a redirect) renders the page for its request alone.
const (
	holeUser = iota
	holeAge
	holeStartedAgo
	holeReconcileAgo
	overviewHoles
)

// overviewPage is one shared rendering of the overview, with the times its
// holes are counted from.
type overviewPage struct {
	page                   *holed
	snapAt, reconcileAt    time.Time
	hasSnap, hasReconciled bool
}

// overviewVariant is what, besides the key, makes two users' overviews differ.
type overviewVariant struct {
	role  string
	draft server.DraftSummary
	has   bool // a draft banner
}

// overviewCache holds a rendering per variant; few exist (three roles, a
// few admins' drafts), and a full map is emptied.
type overviewCache struct {
	mu sync.Mutex
	by map[overviewVariant]*server.Rendered[*overviewPage]
}

const maxOverviewVariants = 64

func (c *overviewCache) of(v overviewVariant) *server.Rendered[*overviewPage] {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil || len(c.by) >= maxOverviewVariants {
		c.by = map[overviewVariant]*server.Rendered[*overviewPage]{}
	}
	rd := c.by[v]
	if rd == nil {
		rd = &server.Rendered[*overviewPage]{}
		c.by[v] = rd
	}
	return rd
}

func (p *Panel) overviewShow(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	key := p.core.KeyNow()
	flash := takeFlash(w, r)
	draft := p.draftBanner(ctx, u, key)
	if flash != "" || key.Snap == nil || u.User == "" {
		pg, err := p.overviewPageOf(r, u, key, draft, nil)
		if err != nil {
			p.fail(w, r, u, err)
			return
		}
		pg.Flash = flash
		p.render(w, r, http.StatusOK, "overview", pg)
		return
	}
	v := overviewVariant{role: u.Role}
	if draft != nil {
		v.draft, v.has = *draft, true
	}
	op, err := p.overviews.of(v).Get(key, func() (*overviewPage, error) { return p.overviewShared(r, u, key, draft) })
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	now := time.Now()
	var vals [overviewHoles]string
	vals[holeUser] = u.User
	if op.hasSnap {
		vals[holeAge] = ageText(now.Sub(op.snapAt))
	}
	vals[holeStartedAgo] = agoAt(p.started, now)
	if op.hasReconciled {
		vals[holeReconcileAgo] = agoAt(op.reconcileAt, now)
	}
	writeHTML(w, http.StatusOK, op.page, vals[:])
}

// overviewShared renders the overview with markers in its holes.
func (p *Panel) overviewShared(r *http.Request, u who, key server.RenderKey, draft *server.DraftSummary) (*overviewPage, error) {
	var marks [overviewHoles]string
	for i := range marks {
		marks[i] = p.holes.mark(i)
	}
	u.User = marks[holeUser]
	pg, err := p.overviewPageOf(r, u, key, draft, marks[:])
	if err != nil {
		return nil, err
	}
	b, err := p.renderBytes(r, "overview", "layout", pg)
	if err != nil {
		return nil, err
	}
	d := pg.Data.(*overviewData)
	op := &overviewPage{page: p.holes.split(b), snapAt: key.Snap.At, hasSnap: true}
	if d.Reconcile != nil {
		op.reconcileAt, op.hasReconciled = d.Reconcile.At, true
	}
	return op, nil
}

// overviewPageOf is the overview's page; marks, when set, go where the
// per-request values would (else they are the request's).
func (p *Panel) overviewPageOf(r *http.Request, u who, key server.RenderKey, draft *server.DraftSummary, marks []string) (*page, error) {
	ctx := r.Context()
	m, err := p.modelAt(ctx, key)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	d := &overviewData{T: m.Totals, Health: m.Health, Rev: m.Rev, Foreign: m.Foreign, Kernel: kernelOf(m.Snap), Started: p.started}
	if rep, ok := p.core.LastReconcile(); ok {
		d.Reconcile = &rep
	}
	d.Daemon = m.Snap != nil
	for _, row := range m.Rows {
		if row.Problem != "" {
			if len(d.Problems) < 10 {
				d.Problems = append(d.Problems, row)
			} else {
				d.MoreProbs++
			}
		}
	}
	if rs, err := p.core.RealServerResults(ctx); err == nil {
		for _, res := range rs {
			if !res.OK() {
				d.PrepIssues++
			}
		}
	}
	d.Tuning = p.tuningBadge(ctx)
	d.BGP = bgpCardOf(p.core.BGPStatus())
	evs, err := p.latestEvents(r, u, server.EventFilter{}, eventsRecent)
	if err != nil {
		return nil, err
	}
	d.Events = eventRowsOf(evs, now)
	if marks != nil {
		d.Age, d.StartedAgo, d.ReconcileAgo = marks[holeAge], marks[holeStartedAgo], marks[holeReconcileAgo]
	} else {
		if m.Snap != nil {
			d.Age = ageText(now.Sub(m.Snap.At))
		}
		d.StartedAgo = agoAt(p.started, now)
		if d.Reconcile != nil {
			d.ReconcileAgo = agoAt(d.Reconcile.At, now)
		}
	}
	return &page{Title: "Overview", Nav: "overview", Who: u, Draft: draft, Data: d}, nil
}
