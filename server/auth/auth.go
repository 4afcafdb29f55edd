// Package auth decides who is calling and what they may do: users with
// argon2id passwords, server-side sessions for the panel, bearer tokens for
// the API, roles checked by one middleware from one route table, login rate
// limits, cross-origin and body-size protection, and the audit record of
// every login and every user or token change.
package auth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/ipvsctl/ipvsctl/server/store"
)

// Via names the interface a change came through.
const (
	ViaCLI   = "cli"
	ViaAPI   = "api"
	ViaPanel = "panel"
)

// FirstAdminHint is what serve prints, and the login page shows, while no
// user exists: there is no default password, so the first admin is made on
// the director itself.
const FirstAdminHint = "no user exists yet: make the first admin on the director with\n" +
	"  ipvsctl user add NAME --role admin"

// Config tunes an Auth; every zero field takes the default named.
type Config struct {
	Params          Params        // argon2id costs; DefaultParams
	IdleTimeout     time.Duration // a session unused this long ends; 30 min
	AbsoluteTimeout time.Duration // a session ends this long after login anyway; 12 h
	// TrustedProxies are the reverse proxies whose X-Forwarded-For (and
	// X-Forwarded-Proto) is believed; any other peer is the client itself.
	TrustedProxies []netip.Prefix
	LoginFailures  int           // failures per user and client address within LoginWindow; 5 (see loginGuard)
	LoginWindow    time.Duration // 5 min; a lockout lasts as long, doubling on each repeat, up to 1 h
	// IsAPI says whether a request wants JSON errors (401, 403) rather than
	// a redirect to the login page: by default, paths under /api/ and
	// requests that do not accept text/html.
	IsAPI     func(*http.Request) bool
	LoginPath string // the panel's login page; /login
	// HTMLError writes an error page for a browser (403, 413); default a
	// plain-text page.
	HTMLError           func(w http.ResponseWriter, r *http.Request, status int, msg string)
	MaxConcurrentHashes int // argon2id runs at once (each takes Params.Memory); 2
	// MaxQueuedChecks bounds the password checks waiting for a hashing
	// slot (past it: 429 with Retry-After); 16. One user, or one client
	// address, has at most one waiting in any case.
	MaxQueuedChecks int
	// LoginSuccesses bounds a user's successful logins within LoginWindow
	// (past it: 429 with Retry-After, no password checked); 20.
	LoginSuccesses int
	// OnLockout, if set, is told of a failed login that locked its user and
	// address (or its address) out, and for how long (the events).
	OnLockout func(user, addr string, wait time.Duration)
	Now       func() time.Time
	Log       *slog.Logger
}

// Auth authenticates and authorizes requests against the store.
type Auth struct {
	st     *store.Store
	cfg    Config
	guard  *loginGuard
	hashes *hashSlots
	// refusals are the refused attempts not yet in the audit (auditRepeat).
	refusals refusalCounts
	// verify is VerifyPassword; tests count its calls.
	verify    func(encoded, password string) (bool, error)
	dummyOnce sync.Once
	dummy     string
	dummyErr  error
}

// New returns an Auth over st.
func New(st *store.Store, cfg Config) *Auth {
	if cfg.Params == (Params{}) {
		cfg.Params = DefaultParams()
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 30 * time.Minute
	}
	if cfg.AbsoluteTimeout <= 0 {
		cfg.AbsoluteTimeout = 12 * time.Hour
	}
	if cfg.LoginFailures <= 0 {
		cfg.LoginFailures = 5
	}
	if cfg.LoginWindow <= 0 {
		cfg.LoginWindow = 5 * time.Minute
	}
	if cfg.IsAPI == nil {
		cfg.IsAPI = defaultIsAPI
	}
	if cfg.LoginPath == "" {
		cfg.LoginPath = "/login"
	}
	if cfg.HTMLError == nil {
		cfg.HTMLError = func(w http.ResponseWriter, _ *http.Request, status int, msg string) { http.Error(w, msg, status) }
	}
	if cfg.MaxConcurrentHashes <= 0 {
		cfg.MaxConcurrentHashes = 2
	}
	if cfg.MaxQueuedChecks <= 0 {
		cfg.MaxQueuedChecks = 16
	}
	if cfg.LoginSuccesses <= 0 {
		cfg.LoginSuccesses = 20
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	a := &Auth{
		st:     st,
		cfg:    cfg,
		hashes: newHashSlots(cfg.MaxConcurrentHashes, cfg.MaxQueuedChecks),
		verify: VerifyPassword,
	}
	a.guard = newLoginGuard(cfg.LoginFailures, cfg.LoginSuccesses, cfg.LoginWindow, func(ctx context.Context, user, addr string) bool {
		ok, err := st.LoggedInFrom(ctx, user, addr)
		return err == nil && ok
	})
	return a
}

func defaultIsAPI(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/api/") || !strings.Contains(r.Header.Get("Accept"), "text/html")
}

func (a *Auth) now() time.Time { return a.cfg.Now() }

// Principal is who is calling: a user through a session (via panel) or a
// token (via api), or the local CLI (via cli, User the OS user).
type Principal struct {
	User       string `json:"user"`
	Role       Role   `json:"role"`
	Via        string `json:"via"`
	ClientAddr string `json:"client_addr"`
	// SessionID is the session's id hash (the cookie itself is secret);
	// TokenID the token's id. At most one is set.
	SessionID string `json:"-"`
	TokenID   int64  `json:"-"`
	// Director says the token is a director's (store.Token.DirectorAt):
	// the HTTP side takes it over TLS only with a believed director
	// certificate.
	Director bool `json:"-"`
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the Principal Authenticate put in a request's context.
func FromContext(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(*Principal)
	return p, ok && p != nil
}

// NeedsFirstUser reports that no user exists yet: serve prints
// FirstAdminHint, and the login page shows it instead of a useless form.
func (a *Auth) NeedsFirstUser(ctx context.Context) (bool, error) {
	n, err := a.st.CountUsers(ctx)
	return n == 0, err
}

// Audit records what p did: action (e.g. "vs add", "rs drain", "login"),
// its target, the revision it made (nil if none) and its outcome: success
// when err is nil, else failure with err's text as detail unless detail is
// given. Every write through the API and the panel calls it once.
func (a *Auth) Audit(ctx context.Context, p *Principal, action, target string, rev *int64, err error, detail string) error {
	e := store.AuditEntry{At: a.now(), Actor: p.User, Via: p.Via, ClientAddr: p.ClientAddr, Action: action,
		Target: target, Revision: rev, Outcome: store.OutcomeSuccess, Detail: detail}
	if err != nil {
		e.Outcome = store.OutcomeFailure
		if detail == "" {
			e.Detail = err.Error()
		}
	}
	if _, werr := a.st.WriteAudit(ctx, e); werr != nil {
		a.cfg.Log.Error("audit record lost", "action", action, "target", target, "actor", p.User, "err", werr)
		return werr
	}
	return nil
}

// randomString is n random bytes, base64url without padding.
func randomString(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random bytes: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
