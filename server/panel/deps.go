// Package panel is ipvsctl's HTML admin panel: server-rendered pages over the
// core (server.Core), with the templates and assets of package web. It does
// no authentication itself: who is logged in, logging in and out and changing
// one's own password are given to it (Deps); the users, tokens and audit it
// shows and edits are the core's.
package panel

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
)

// Deps is what the panel is given.
type Deps struct {
	Core *server.Core
	// Who is the logged-in user of a request (put in its context by the auth
	// middleware); ok is false when nobody is.
	Who func(r *http.Request) (user, role string, ok bool)
	// Login checks a password, starts a session (its cookie set on w) and
	// audits the attempt. A *LoginError's message is shown on the page
	// (bad password, rate limited); any other error is logged and shown as
	// "login failed".
	Login func(w http.ResponseWriter, r *http.Request, user, password string) error
	// TrustedOrigins may post besides the panel's own origin (serve
	// --trusted-origin: a reverse proxy's public name).
	TrustedOrigins []string
	// Logout ends the request's session.
	Logout func(w http.ResponseWriter, r *http.Request)
	// NoUsers reports that no user exists yet: the login page then says how
	// to make the first admin.
	NoUsers func(ctx context.Context) bool
	// ChangePassword changes a user's own password after checking the old one.
	ChangePassword func(ctx context.Context, user, old, new string) error
	// ClientAddr is a request's client address for the audit; nil means the
	// connection's (r.RemoteAddr's host).
	ClientAddr func(r *http.Request) string
	// Started is when the daemon started ("up since"); zero means when New ran.
	Started time.Time
	Log     *slog.Logger
	// PageSize is how many virtual services a page of the live table shows; 0 means 25.
	PageSize int
}

// LoginError is a refused login (or password change) whose message the
// page shows; RetryAfter > 0 (seconds) makes it 429 with Retry-After.
type LoginError struct {
	Msg        string
	RetryAfter int
}

func (e *LoginError) Error() string { return e.Msg }
