package httpd

import (
	"context"
	"errors"
	"fmt"
	"github.com/ipvsctl/ipvsctl/server/edge"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/panel"
	"github.com/ipvsctl/ipvsctl/server/trust"
)

// MaxBody bounds a request body: a director's whole document (1,000
// services x 10 real servers is about 1 MB) with room to spare.
const MaxBody = 16 << 20

// Options configure the HTTP side of the daemon.
type Options struct {
	Core *server.Core
	Auth *auth.Auth
	Log  *slog.Logger
	// TrustedOrigins are origins allowed besides the panel's own (a proxy's public name).
	TrustedOrigins []string
	// Panel, if set, serves the HTML panel under / (its login page and assets
	// public, the rest to logged-in users; it checks each action's role):
	// its routes go into the same router as the API's.
	Panel *panel.Panel
	// Metrics, if set, serves /metrics to viewers (unless it has its own listener).
	Metrics http.Handler
	// Instrument, if set, wraps each route's handler with its pattern (request metrics).
	Instrument func(pattern string, h http.Handler) http.Handler
}

// Handler is the daemon's HTTP handler on its TCP listener: every route
// authenticated by session or token and checked against its role, unsafe
// methods refused across origins, bodies bounded.
func Handler(o Options) (http.Handler, error) {
	crossOrigin, err := o.Auth.CrossOrigin(o.TrustedOrigins...)
	if err != nil {
		return nil, err
	}
	r := chi.NewRouter()
	r.Use(edge.Headers, auth.MaxBody(MaxBody), crossOrigin, o.directorsOnly)
	o.register(r, func(role auth.Role, h http.Handler) http.Handler { return o.Auth.Guard(role, o.directorTokens(h)) })
	return r, nil
}

// LocalHandler is the same API on the local socket for the CLI: the socket
// is the owner's only (mode 0600, as the database), so its caller is the
// director's administrator, named by the X-Ipvsctl-Author header.
func LocalHandler(o Options) http.Handler {
	r := chi.NewRouter()
	r.Use(auth.MaxBody(MaxBody))
	o.Panel, o.Metrics = nil, nil
	o.register(r, func(_ auth.Role, h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := &auth.Principal{User: orDefault(r.Header.Get("X-Ipvsctl-Author"), "root"), Role: auth.Admin, Via: "cli"}
			h.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
		})
	})
	return r
}

// routeTable is every route of the API (and /healthz, /readyz, /metrics): what the
// OpenAPI document describes, one operation each (openapi_test.go).
func (o Options) routeTable(a *api) []auth.Route {
	routes := append(a.routes(), auth.Route{Method: "GET", Pattern: "/healthz", Role: auth.Public, Handler: http.HandlerFunc(a.healthz)},
		auth.Route{Method: "GET", Pattern: "/readyz", Role: auth.Public, Handler: http.HandlerFunc(a.readyz)})
	routes = append(routes, a.remoteRoutes()...) // users, tokens, charts (api_users.go)
	routes = append(routes, auth.Route{Method: "GET", Pattern: PathOpenAPI, Role: auth.Viewer, Handler: http.HandlerFunc(serveOpenAPI)})
	if o.Metrics != nil {
		routes = append(routes, auth.Route{Method: "GET", Pattern: "/metrics", Role: auth.Viewer, Handler: o.Metrics})
	}
	return routes
}

func (o Options) register(r chi.Router, guard func(auth.Role, http.Handler) http.Handler) {
	a := &api{core: o.Core, streams: pollLimit{max: MaxEventStreamsPerUser}}
	for _, rt := range o.routeTable(a) {
		if rt.Role < auth.Public || rt.Role > auth.Admin || rt.Handler == nil {
			panic(fmt.Sprintf("httpd: route %s %s has no role or no handler", rt.Method, rt.Pattern))
		}
		h := rt.Handler
		if o.Instrument != nil {
			h = o.Instrument(rt.Pattern, h)
		}
		r.Method(rt.Method, rt.Pattern, guard(rt.Role, edge.DecodePath(h)))
	}
	apiNotFound := func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, &ErrorBody{Error: "no such route: " + r.Method + " " + r.URL.Path, Code: server.CodeNotFound, Fields: []FieldError{}})
	}
	if o.Panel != nil {
		// One router: the panel's pages beside the API's routes, each
		// public one knowing who asks (if anyone), the rest for a logged-in
		// user (the panel checks each action's role, server.Policy's).
		for _, rt := range o.Panel.RouteTable() {
			ph := edge.DecodePath(rt.Handler)
			h := o.Auth.Authenticate(o.directorTokens(ph))
			if rt.Public {
				h = o.Auth.Identify(o.directorTokens(ph))
			}
			if o.Instrument != nil {
				h = o.Instrument("panel", h)
			}
			r.Method(rt.Method, rt.Pattern, h)
		}
		panelNotFound := o.Auth.Identify(http.HandlerFunc(o.Panel.NotFound))
		apiNotFound = func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/api/") {
				writeJSON(w, http.StatusNotFound, &ErrorBody{Error: "no such route: " + r.Method + " " + r.URL.Path, Code: server.CodeNotFound, Fields: []FieldError{}})
				return
			}
			panelNotFound.ServeHTTP(w, r)
		}
	}
	r.NotFound(apiNotFound)
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusMethodNotAllowed, &ErrorBody{Error: r.Method + " is not allowed on " + r.URL.Path, Code: server.CodeBadInput, Fields: []FieldError{}})
	})
}

// healthz says the daemon is up, and whether it has the kernel (from the
// snapshot: a liveness probe costs nothing however large the table).
func (a *api) healthz(w http.ResponseWriter, r *http.Request) {
	if snap := a.core.Snapshot(); snap != nil && (snap.Table == nil || snap.Err != nil) {
		fmt.Fprintln(w, "ok (kernel IPVS unavailable)")
		return
	}
	fmt.Fprintln(w, "ok")
}

// Server is the daemon's listeners: TCP for the panel and the API, the
// local socket for the CLI, and optionally its own listener for /metrics.
type Server struct {
	servers []*http.Server
	lns     []net.Listener
	log     *slog.Logger
}

// NewHTTPServer is an http.Server with the timeouts a daemon facing a
// network needs.
func NewHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      120 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// Add serves h on ln (TLS when tlsCert is set).
func (s *Server) Add(ln net.Listener, h http.Handler, log *slog.Logger) *http.Server {
	srv := NewHTTPServer(h, log)
	s.servers = append(s.servers, srv)
	s.lns = append(s.lns, ln)
	s.log = log
	return srv
}

// ListenUnix listens on a socket only its owner may use, replacing a stale one.
func ListenUnix(path string) (net.Listener, error) {
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("%s: another ipvsctl serve is running", path)
	}
	_ = os.Remove(path)
	// The socket sits beside the database, in a directory only root may enter.
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// Run serves until ctx is cancelled, then shuts down gracefully: requests in
// flight finish (within 30 s).
func (s *Server) Run(ctx context.Context, tlsCert, tlsKey string, tlsOn []bool) error {
	errs := make(chan error, len(s.servers))
	var wg sync.WaitGroup
	for i, srv := range s.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if i < len(tlsOn) && tlsOn[i] {
				srv.TLSConfig = trust.ServerConfig() // asks for a director's client certificate (peers.go)
				err = srv.ServeTLS(s.lns[i], tlsCert, tlsKey)
			} else {
				err = srv.Serve(s.lns[i])
			}
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("serve %s: %w", s.lns[i].Addr(), err)
			}
		}()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	shut, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, srv := range s.servers {
		_ = srv.Shutdown(shut)
	}
	wg.Wait()
	return err
}
