package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ipvsctl/ipvsctl/server/edge"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Route is one line of the router's table: a method and pattern, the least
// role that may call it, and its handler. Every route says its role, next to
// its pattern, in one table; Register refuses a route that does not.
type Route struct {
	Method  string
	Pattern string
	Role    Role
	Handler http.Handler
}

// Register adds routes through handle (chi's Router.Method fits as is;
// for a ServeMux: func(m, p string, h http.Handler) { mux.Handle(m+" "+p, h) }),
// each wrapped in the check its role asks for: Public routes only learn who
// calls if credentials come with the request; every other route needs a
// valid session or token (Authenticate) and a role that Allows it (Require).
// A route without a role is a programming error: Register panics at
// start-up rather than serve it unguarded.
func (a *Auth) Register(handle func(method, pattern string, h http.Handler), routes []Route) {
	for _, rt := range routes {
		if rt.Role < Public || rt.Role > Admin || rt.Handler == nil || rt.Method == "" {
			panic(fmt.Sprintf("auth.Register: route %s %s has no role or no handler", rt.Method, rt.Pattern))
		}
		handle(rt.Method, rt.Pattern, a.Guard(rt.Role, rt.Handler))
	}
}

// Guard wraps one handler in the checks for role (what Register does to
// each route): for a route outside the table, such as /metrics.
func (a *Auth) Guard(role Role, h http.Handler) http.Handler {
	if role == Public {
		return a.Identify(h)
	}
	return a.Authenticate(a.Require(role)(h))
}

// Authenticate puts the caller's Principal in the request's context, from
// an Authorization: Bearer token or else the session cookie. Without valid
// credentials an API request gets 401 JSON and a browser a 303 to the login
// page with ?next= the page it asked for.
func (a *Auth) Authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.principal(r)
		if err != nil {
			a.unauthenticated(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
	})
}

// Identify is Authenticate that lets a request without valid credentials
// through, with no Principal: for public routes (the login page may say who
// is logged in already).
func (a *Auth) Identify(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, err := a.principal(r); err == nil {
			r = r.WithContext(WithPrincipal(r.Context(), p))
		}
		next.ServeHTTP(w, r)
	})
}

// principal resolves a request's credentials: ErrUnauthenticated without
// any, a *TokenError for a bad token, another error if the store failed.
func (a *Auth) principal(r *http.Request) (*Principal, error) {
	addr := a.ClientAddr(r)
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return nil, &TokenError{Reason: "must come as Authorization: Bearer TOKEN"}
		}
		p, err := a.tokenPrincipal(r.Context(), strings.TrimSpace(token), addr)
		if err != nil {
			return nil, err
		}
		return a.directorToken(r, p)
	}
	if c, err := r.Cookie(CookieName); err == nil {
		p, err := a.sessionPrincipal(r.Context(), c.Value, addr)
		if err != nil {
			return nil, err
		}
		if p != nil {
			return p, nil
		}
	}
	return nil, ErrUnauthenticated
}

func (a *Auth) unauthenticated(w http.ResponseWriter, r *http.Request, err error) {
	var te *TokenError
	switch {
	case errors.As(err, &te):
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		WriteError(w, http.StatusUnauthorized, err.Error())
	case !errors.Is(err, ErrUnauthenticated):
		a.cfg.Log.Error("authenticate", "err", err)
		WriteError(w, http.StatusServiceUnavailable, "cannot check credentials now: "+err.Error())
	case a.cfg.IsAPI(r):
		w.Header().Set("WWW-Authenticate", `Bearer realm="ipvsctl"`)
		WriteError(w, http.StatusUnauthorized, err.Error())
	default:
		http.Redirect(w, r, a.cfg.LoginPath+"?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
	}
}

// Require refuses, with 403, a caller whose role does not allow need (and
// with 401 or the login page a request Authenticate did not pass).
func (a *Auth) Require(need Role) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, ok := FromContext(r.Context())
			if !ok {
				a.unauthenticated(w, r, ErrUnauthenticated)
				return
			}
			if !Allows(p.Role, need) {
				a.fail(w, r, http.StatusForbidden, fmt.Sprintf("%s is %s %s: this needs the %s role", p.User, article(p.Role), p.Role, need))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func article(r Role) string {
	if r == Admin || r == Operator {
		return "an"
	}
	return "a"
}

// fail writes an error as JSON for the API, as a page for a browser.
func (a *Auth) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if a.cfg.IsAPI(r) {
		WriteError(w, status, msg)
		return
	}
	a.cfg.HTMLError(w, r, status, msg)
}

// WriteError writes the API's error body: {"error": msg, "fields": []}.
func WriteError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(struct {
		Error  string     `json:"error"`
		Fields []struct{} `json:"fields"`
	}{msg, []struct{}{}})
}

// WriteLoginError answers a failed login for the API: 429 with Retry-After
// when rate-limited, 422 for an invalid name, 401 otherwise. (The panel
// shows the same messages on its login page; it sets Retry-After from
// *RateLimitError.Seconds too.)
func WriteLoginError(w http.ResponseWriter, err error) {
	var rl *RateLimitError
	var inv *InvalidError
	switch {
	case errors.As(err, &rl):
		w.Header().Set("Retry-After", strconv.Itoa(rl.Seconds()))
		WriteError(w, http.StatusTooManyRequests, err.Error())
	case errors.Is(err, ErrBadCredentials):
		WriteError(w, http.StatusUnauthorized, err.Error())
	case errors.As(err, &inv):
		WriteError(w, http.StatusUnprocessableEntity, err.Error())
	default:
		WriteError(w, http.StatusInternalServerError, "login failed: "+err.Error())
	}
}

// SafeNext is the page to go to after login: next if it is a path on this
// site, else "/" (never another site: no open redirect).
func SafeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, `/\`) ||
		u.Scheme != "" || u.Host != "" {
		return "/"
	}
	return next
}

// CrossOrigin returns middleware that refuses unsafe methods (POST, PUT,
// PATCH, DELETE) sent by a browser from another origin, with net/http's
// CrossOriginProtection: 403, JSON for the API. Requests without
// Sec-Fetch-Site or Origin headers (curl, scripts with a bearer token, the
// CLI) are not from a browser and pass. trustedOrigins (scheme://host[:port])
// are origins allowed besides our own, e.g. a proxy's public name when it
// rewrites Host.
func (a *Auth) CrossOrigin(trustedOrigins ...string) (func(http.Handler) http.Handler, error) {
	mw, err := edge.CrossOrigin(trustedOrigins, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.fail(w, r, http.StatusForbidden, "cross-origin request refused: a "+r.Method+" from another site (Origin "+
			strconv.Quote(r.Header.Get("Origin"))+") is not allowed")
	}))
	if err != nil {
		return nil, &InvalidError{Field: "trusted-origin", Message: err.Error()}
	}
	return mw, nil
}

// MaxBody limits request bodies to limit bytes. A body declared larger gets
// 413 at once; one that turns out larger makes the handler's read fail with
// *http.MaxBytesError (see IsBodyTooLarge), and the handler answers 413.
func MaxBody(limit int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > limit {
				WriteError(w, http.StatusRequestEntityTooLarge, bodyTooLarge(limit))
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			next.ServeHTTP(w, r)
		})
	}
}

// IsBodyTooLarge reports an error from reading a body past MaxBody's limit;
// WriteBodyTooLarge answers it.
func IsBodyTooLarge(err error) bool {
	var mb *http.MaxBytesError
	return errors.As(err, &mb)
}

// WriteBodyTooLarge answers 413 for err if IsBodyTooLarge(err), and says
// whether it did.
func WriteBodyTooLarge(w http.ResponseWriter, err error) bool {
	var mb *http.MaxBytesError
	if !errors.As(err, &mb) {
		return false
	}
	WriteError(w, http.StatusRequestEntityTooLarge, bodyTooLarge(mb.Limit))
	return true
}

func bodyTooLarge(limit int64) string {
	return fmt.Sprintf("request body is larger than the limit of %d bytes", limit)
}
