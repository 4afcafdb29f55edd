// Package panel is ipvsctl's HTML admin panel: server-rendered pages over the
// core (server.Core), with the templates and assets of package web. It does
// no authentication itself: who is logged in, logging in and out, and the
// user, token and audit stores are given to it (Deps).
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
	// Accounts backs the users, tokens and audit screens; nil hides them.
	Accounts Accounts
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

// User is one account as the users screen lists it.
type User struct {
	Name      string
	Role      string
	Created   time.Time
	LastLogin time.Time // zero: never
}

// Token is one API token (never its secret).
type Token struct {
	ID       string
	Name     string // what it is for
	User     string
	Created  time.Time
	Expires  time.Time // zero: never
	LastUsed time.Time // zero: never
	// Director: a peer director's token (taken over TLS only with its certificate).
	Director bool
}

// AuditEntry is one audited action.
type AuditEntry struct {
	At       time.Time
	User     string
	Addr     string
	Via      string
	Action   string // e.g. login, login-failed, vs set, rollback
	Detail   string
	Revision int64 // 0: none
	OK       bool
}

// AuditFilter selects audit entries; zero fields match everything.
type AuditFilter struct {
	User   string
	Action string // a substring of the action, what it was on or its detail, in any case
	Since  time.Time
	Limit  int
}

// Accounts is the auth store as the admin screens need it; the daemon
// adapts its user, token and audit stores to it. Errors are shown to the
// admin as they are: their messages must be fit for that.
type Accounts interface {
	ListUsers(ctx context.Context) ([]User, error)
	AddUser(ctx context.Context, name, role, password string) error
	RemoveUser(ctx context.Context, name string) error
	SetRole(ctx context.Context, name, role string) error
	ResetPassword(ctx context.Context, name, password string) error
	ListTokens(ctx context.Context) ([]Token, error)
	// CreateToken makes a token for user, shown once (secret); an empty
	// name is made from the user's.
	CreateToken(ctx context.Context, user, name string, expires time.Duration) (id, secret string, err error)
	RevokeToken(ctx context.Context, id string) error
	Audit(ctx context.Context, f AuditFilter) ([]AuditEntry, error)
}
