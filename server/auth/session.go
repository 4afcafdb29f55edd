package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/ipvsctl/ipvsctl/server/store"
)

// CookieName is the session cookie.
const CookieName = "ipvsctl_session"

// touchEvery is how often a session's or token's use is written: a request
// costs no write most of the time; idle expiry is exact to within it.
const touchEvery = time.Minute

// Session is a new login. ID is the secret cookie value: it is set in the
// cookie and never stored (the store keeps its SHA-256).
type Session struct {
	ID            string
	User          string
	Role          Role
	IdleExpiresAt time.Time
	ExpiresAt     time.Time
}

func hashSecret(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Login checks name and password and starts a session, with a new random
// id. Failures are rate-limited (loginGuard: per user and client address,
// per address, and a per-user slowdown that spares the addresses the user
// logs in from) with *RateLimitError, no password checked; every attempt is
// audited, refused ones one row per user, address and AuditRepeatWindow.
// A wrong name and a wrong password both give ErrBadCredentials, after the
// same work: an unknown user's password is checked against a dummy hash.
func (a *Auth) Login(ctx context.Context, name, password, clientAddr string) (*Session, error) {
	now := a.now()
	by := &Principal{User: name, Via: ViaPanel, ClientAddr: clientAddr}
	u, err := a.verifyAttempt(ctx, by, "login", name, password, now)
	if err != nil {
		return nil, err
	}
	audit := func(err error) { _ = a.Audit(ctx, by, "login", "", nil, err, "") }
	role, err := ParseRole(u.Role)
	if err != nil {
		audit(err)
		return nil, err
	}
	id, err := randomString(32)
	if err != nil {
		audit(err)
		return nil, err
	}
	s := &Session{ID: id, User: u.Name, Role: role, IdleExpiresAt: now.Add(a.cfg.IdleTimeout), ExpiresAt: now.Add(a.cfg.AbsoluteTimeout)}
	s.IdleExpiresAt = minTime(s.IdleExpiresAt, s.ExpiresAt)
	if err := a.st.CreateSession(ctx, &store.Session{IDHash: hashSecret(id), UserID: u.ID, CreatedAt: now, LastSeenAt: now,
		IdleExpiresAt: s.IdleExpiresAt, ExpiresAt: s.ExpiresAt, ClientAddr: clientAddr}); err != nil {
		audit(err)
		return nil, err
	}
	audit(nil)
	return s, nil
}

// AuditRepeatWindow is how long refused attempts of one user from one
// address add to one audit row.
const AuditRepeatWindow = 15 * time.Minute

// verifyAttempt checks name's password for action (login, password
// change) under the login limits, holding a hashing slot: the limits are
// read once the attempt holds one, so that attempts sent all at once are
// counted before the next is let in, and at most MaxConcurrentHashes
// argon2id computations (Params.Memory each) run however many arrive.
// Failures are audited (aggregated); success is the caller's to audit.
func (a *Auth) verifyAttempt(ctx context.Context, by *Principal, action, name, password string, now time.Time) (*store.User, error) {
	limitName := name
	if CheckName("name", name) != nil {
		// No user has such a name: one key holds them all, so that a flood
		// of long names takes no memory.
		by.User, limitName = quoteShort(name), "(invalid name)"
	}
	// A user at its bound of successful logins is refused before it waits
	// for a hashing slot (admit decides again, in the slot).
	if wait := a.guard.successesWait(limitName, now, false); wait > 0 {
		reason := a.guard.successesReason()
		a.auditRefusal(ctx, by, action, "refused: "+reason)
		return nil, &RateLimitError{RetryAfter: wait, Reason: reason}
	}
	release, err := a.hashes.acquire(ctx, limitName, by.ClientAddr)
	if err != nil {
		var rl *RateLimitError
		if errors.As(err, &rl) {
			a.auditRefusal(ctx, by, action, "refused: "+rl.Reason)
		}
		return nil, err
	}
	defer release()
	if wait, reason := a.guard.admit(ctx, limitName, by.ClientAddr, now); wait > 0 {
		who := *by
		if _, err := a.st.UserByName(ctx, name); errors.Is(err, store.ErrNotFound) {
			who.User = "(unknown user)"
		}
		if reason != "" {
			a.auditRefusal(ctx, &who, action, "refused: "+reason)
		} else {
			a.auditRepeat(ctx, &who, action, "refused: too many failed attempts")
		}
		return nil, &RateLimitError{RetryAfter: wait, Reason: reason}
	}
	defer a.guard.done(limitName)
	u, ok, reason, err := a.checkPassword(ctx, name, password)
	if err != nil {
		_ = a.Audit(ctx, by, action, "", nil, err, "")
		return nil, err
	}
	if !ok {
		a.guard.failed(limitName, by.ClientAddr, now)
		if wait := a.guard.lockedFor(limitName, by.ClientAddr, now); wait > 0 && a.cfg.OnLockout != nil {
			a.cfg.OnLockout(limitName, by.ClientAddr, wait)
		}
		who := *by
		if reason == "unknown user" {
			// One row for all the names no user has, from one address.
			who.User = "(unknown user)"
		}
		a.auditRepeat(ctx, &who, action, reason)
		return nil, ErrBadCredentials
	}
	a.guard.succeeded(limitName, by.ClientAddr, now)
	return u, nil
}

// auditRepeat records a refused attempt, counted into the row of the same
// actor, address and action within AuditRepeatWindow.
func (a *Auth) auditRepeat(ctx context.Context, p *Principal, action, detail string) {
	e := store.AuditEntry{At: a.now(), Actor: p.User, Via: p.Via, ClientAddr: p.ClientAddr, Action: action,
		Outcome: store.OutcomeFailure, Detail: detail}
	if _, err := a.st.WriteAuditRepeat(context.WithoutCancel(ctx), e, AuditRepeatWindow); err != nil {
		a.cfg.Log.Error("audit record lost", "action", e.Action, "actor", e.Actor, "err", err)
	}
}

// auditRefusal is auditRepeat for an attempt refused because the password
// checks were busy or the user logged in too often, which a flood answered
// at once brings by the thousand, from as many addresses as it has: they
// are counted in memory, by (actor, address, reason), and refusalFlush
// after the first all that were counted are written in one transaction.
// The flood costs the database one commit a second, whatever its number
// of addresses, and does not slow everyone's logins with its commits.
func (a *Auth) auditRefusal(ctx context.Context, p *Principal, action, detail string) {
	e := store.AuditEntry{Actor: p.User, Via: p.Via, ClientAddr: p.ClientAddr, Action: action, Outcome: store.OutcomeFailure, Detail: detail}
	if a.refusals.add(e) {
		time.AfterFunc(refusalFlush, a.flushRefusals)
	}
}

// flushRefusals writes the refusals counted since the last flush.
func (a *Auth) flushRefusals() {
	es := a.refusals.take()
	at := a.now()
	for i := range es {
		es[i].At = at
	}
	if err := a.st.WriteAuditRepeats(context.Background(), es, AuditRepeatWindow); err != nil {
		a.cfg.Log.Error("audit records lost", "refusals", len(es), "err", err)
	}
}

// ChangePassword is a user changing their own password: the old one is
// checked as a login checks it (the same hashing slots, limits and audit),
// then the new one must meet the policy; the user's sessions end.
func (a *Auth) ChangePassword(ctx context.Context, by *Principal, old, password string) error {
	now := a.now()
	p := *by
	if _, err := a.verifyAttempt(ctx, &p, "password change", by.User, old, now); err != nil {
		if errors.Is(err, ErrBadCredentials) {
			return ErrWrongPassword
		}
		return err
	}
	err := a.setPassword(ctx, by.User, password)
	_ = a.Audit(ctx, &p, "password change", by.User, nil, err, "")
	return err
}

// checkPassword verifies name's password, the caller holding a hashing
// slot; reason says why not, for the audit record only.
func (a *Auth) checkPassword(ctx context.Context, name, password string) (u *store.User, ok bool, reason string, err error) {
	u, err = a.st.UserByName(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		// The same work as for a real user, so that the time taken does
		// not tell who exists.
		dummy, derr := a.dummyHash()
		if derr != nil {
			return nil, false, "", derr
		}
		a.hashes.counted()
		a.verify(dummy, password)
		return nil, false, "unknown user", nil
	}
	if err != nil {
		return nil, false, "", err
	}
	a.hashes.counted()
	match, err := a.verify(u.PasswordHash, password)
	if err != nil {
		return nil, false, "", fmt.Errorf("user %q: %w", name, err)
	}
	if !match {
		return nil, false, "wrong password", nil
	}
	if needsRehash(u.PasswordHash, a.cfg.Params) {
		a.hashes.counted()
		if h, err := HashPassword(a.cfg.Params, password); err == nil {
			if err := a.st.UpgradePasswordHash(ctx, u.ID, u.PasswordHash, h); err != nil {
				a.cfg.Log.Warn("upgrade password hash", "user", name, "err", err)
			}
		}
	}
	return u, true, "", nil
}

// dummyHash is a PHC string with the configured costs whose key matches no
// password: checking a password against it costs what a real check costs.
// Its random key stands in for a hash, so making it costs nothing.
func (a *Auth) dummyHash() (string, error) {
	a.dummyOnce.Do(func() {
		p := a.cfg.Params
		salt, key := make([]byte, p.SaltLen), make([]byte, p.KeyLen)
		if _, err := rand.Read(salt); err != nil {
			a.dummyErr = err
			return
		}
		if _, err := rand.Read(key); err != nil {
			a.dummyErr = err
			return
		}
		a.dummy = encodeHash(p, salt, key)
	})
	return a.dummy, a.dummyErr
}

// LoginHTTP is Login for a request: the client address from the request,
// the session the request came with (if any) ended, and the new session's
// cookie set. The panel's login form and POST /api/v1/login call it.
func (a *Auth) LoginHTTP(w http.ResponseWriter, r *http.Request, name, password string) (*Session, error) {
	s, err := a.Login(r.Context(), name, password, a.ClientAddr(r))
	if err != nil {
		return nil, err
	}
	if c, err := r.Cookie(CookieName); err == nil && c.Value != "" {
		if err := a.st.DeleteSession(r.Context(), hashSecret(c.Value)); err != nil {
			a.cfg.Log.Warn("end the session before login", "err", err)
		}
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: s.ID, Path: "/",
		HttpOnly: true, Secure: a.isHTTPS(r), SameSite: http.SameSiteStrictMode})
	return s, nil
}

// Logout ends the request's session on the server and clears its cookie;
// a request without one is not an error. It is audited.
func (a *Auth) Logout(w http.ResponseWriter, r *http.Request) error {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: a.isHTTPS(r), SameSite: http.SameSiteStrictMode})
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return nil
	}
	p, _ := a.sessionPrincipal(r.Context(), c.Value, a.ClientAddr(r))
	err = a.st.DeleteSession(r.Context(), hashSecret(c.Value))
	if p != nil {
		_ = a.Audit(r.Context(), p, "logout", "", nil, err, "")
	}
	return err
}

// sessionPrincipal resolves a session cookie value; nil without error for a
// session unknown or ended (an ended one is removed).
func (a *Auth) sessionPrincipal(ctx context.Context, cookie, clientAddr string) (*Principal, error) {
	if len(cookie) != 43 {
		return nil, nil
	}
	h := hashSecret(cookie)
	s, err := a.st.SessionByHash(ctx, h)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	now := a.now()
	if !now.Before(s.IdleExpiresAt) || !now.Before(s.ExpiresAt) {
		return nil, a.st.DeleteSession(ctx, h)
	}
	role, err := ParseRole(s.Role)
	if err != nil {
		return nil, err
	}
	if now.Sub(s.LastSeenAt) >= touchEvery {
		if err := a.st.TouchSession(ctx, h, now, minTime(now.Add(a.cfg.IdleTimeout), s.ExpiresAt)); err != nil {
			a.cfg.Log.Warn("record session use", "user", s.UserName, "err", err)
		}
	}
	return &Principal{User: s.UserName, Role: role, Via: ViaPanel, ClientAddr: clientAddr, SessionID: h}, nil
}

// EndExpiredSessions removes sessions that have ended; the daemon calls it
// now and then (say hourly) so the table does not grow.
func (a *Auth) EndExpiredSessions(ctx context.Context) (int64, error) {
	return a.st.DeleteExpiredSessions(ctx, a.now())
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// refusalFlush is how often the refusals counted are written to the audit.
const refusalFlush = time.Second

// refusalCounts holds the refusals not yet written, by kind.
type refusalCounts struct {
	mu      sync.Mutex
	m       map[refusalKey]*store.AuditEntry // Repeats counts them
	pending bool                             // a flush is due
}

type refusalKey struct{ actor, addr, action, detail string }

// add counts one refusal like e, and says whether the caller is to
// schedule the flush (none was due).
func (r *refusalCounts) add(e store.AuditEntry) (schedule bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := refusalKey{e.Actor, e.ClientAddr, e.Action, e.Detail}
	p := r.m[k]
	if p == nil {
		if r.m == nil || len(r.m) >= maxKeys {
			r.m = map[refusalKey]*store.AuditEntry{} // what was pending is lost: at most a second's count each
		}
		p = &e
		r.m[k] = p
	}
	p.Repeats++
	schedule, r.pending = !r.pending, true
	return schedule
}

// take ends the flush's second: what was counted in it, to be written.
func (r *refusalCounts) take() []store.AuditEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	es := make([]store.AuditEntry, 0, len(r.m))
	for _, e := range r.m {
		es = append(es, *e)
	}
	r.m, r.pending = nil, false
	return es
}
