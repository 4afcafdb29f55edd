package panel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/ipvsctl/ipvsctl/server/edge"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
)

// Storage keeps the panel's chart points (the core is one).
type Storage interface {
	ChartSeries(ctx context.Context, keys []string, seen int64) (map[string]int64, error)
	ChartSeriesID(ctx context.Context, key string) (int64, error)
	SaveChartPoints(ctx context.Context, res int, t int64, chunks map[int64][]byte, keepFrom, forgetBefore int64) error
	ChartPoints(ctx context.Context, res int, chunk, since int64) ([]server.ChartRow, error)
}

// Panel is the admin panel's handlers.
type Panel struct {
	d       Deps
	core    *server.Core
	storage Storage
	log     *slog.Logger
	views   *views
	assets  *assets
	started time.Time

	cache   modelCache
	holes   holes
	sampler *sampler
	liveMu  sync.Mutex
	live    *liveView // the live table's rows, for the current model

	overviews overviewCache
}

// New checks d and reads the assets; each view's template is parsed on its
// first use.
func New(d Deps) (*Panel, error) {
	if d.Core == nil || d.Who == nil || d.Login == nil || d.Logout == nil {
		return nil, errors.New("panel: Core, Who, Login and Logout are required")
	}
	p := &Panel{d: d, core: d.Core, storage: d.Core, log: d.Log, started: d.Started}
	p.holes = newHoles()
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.started.IsZero() {
		p.started = time.Now()
	}
	if p.d.PageSize <= 0 {
		p.d.PageSize = 25
	}
	var err error
	if p.assets, err = loadAssets(); err != nil {
		return nil, err
	}
	p.views = parseViews(p.assets)
	p.sampler = newSampler(p)
	return p, nil
}

// Routes serves the panel alone (its tests do), as the daemon's router
// serves it beside the API: every route behind the security headers, the
// cross-origin protection and decoded path values (package edge). Pages
// need a logged-in user (Who) except /login and /static/.
func (p *Panel) Routes() http.Handler {
	r := chi.NewRouter()
	crossOrigin, err := edge.CrossOrigin(p.d.TrustedOrigins, nil)
	if err != nil {
		p.log.Error("panel: trusted origin refused", "err", err)
		crossOrigin, _ = edge.CrossOrigin(nil, nil)
	}
	r.Use(edge.Headers, crossOrigin)
	for _, rt := range p.RouteTable() {
		r.Method(rt.Method, rt.Pattern, edge.DecodePath(rt.Handler))
	}
	r.NotFound(p.NotFound)
	return r
}

// NotFound is the panel's page for a path it has not.
func (p *Panel) NotFound(w http.ResponseWriter, r *http.Request) {
	http.Error(w, "404 page not found", http.StatusNotFound)
}

// who is the request's user, with their role (auth's roles, the ones the
// core's Policy speaks of; a role name auth does not know may do nothing).
type who struct {
	User string
	Role string
	role auth.Role
}

func whoOf(user, role string) who {
	r, err := auth.ParseRole(role)
	if err != nil {
		r = auth.Public
	}
	return who{User: user, Role: role, role: r}
}

// Can says whether the user may do action (server.Policy's role for it).
func (w who) Can(action string) bool { return w.allows(server.RoleFor(action)) }

func (w who) allows(r auth.Role) bool { return auth.Allows(w.role, r) }

// CanOperate and CanAdmin are the templates' words for what an operator
// (draining a server) and an admin (applying a state) may do: Policy's.
func (w who) CanOperate() bool { return w.Can("rs drain") }
func (w who) CanAdmin() bool   { return w.Can("apply") }

// need wraps a handler: nobody logged in goes to the login page, a role
// below min gets 403.
func (p *Panel) need(min auth.Role, h func(http.ResponseWriter, *http.Request, who)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		user, role, ok := p.d.Who(r)
		if !ok {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, "/login?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			p.renderError(w, r, who{}, http.StatusUnauthorized, "You are not logged in.")
			return
		}
		u := whoOf(user, role)
		if !auth.Allows(u.role, min) {
			p.renderError(w, r, u, http.StatusForbidden, fmt.Sprintf("This needs the %s role; you are %s.", min, role))
			return
		}
		h(w, r, u)
	}
}

// loggedIn wraps a page that every logged-in user may see (a viewer's).
func (p *Panel) loggedIn(h func(http.ResponseWriter, *http.Request, who)) http.HandlerFunc {
	return p.need(auth.Viewer, h)
}

// needTo wraps a handler that makes action: its least role is the core's
// (server.Policy), the one the API's route and the core's own check use.
func (p *Panel) needTo(action string, h func(http.ResponseWriter, *http.Request, who)) http.HandlerFunc {
	return p.need(server.RoleFor(action), h)
}

func (p *Panel) actor(r *http.Request, u who) server.Actor {
	addr := ""
	if p.d.ClientAddr != nil {
		addr = p.d.ClientAddr(r)
	} else if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		addr = host
	}
	return server.Actor{Name: u.User, Via: "panel", Addr: addr, Role: u.role}
}

// bufPool holds render buffers: a page is rendered whole before any byte is
// written, so that a template error becomes an error page, not half a page.
var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}
