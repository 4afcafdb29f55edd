package httpd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/panel"
)

// NewPanel is the HTML panel over the core, its users and sessions those of a.
func NewPanel(core *server.Core, a *auth.Auth, started time.Time, o Options) (*panel.Panel, error) {
	return panel.New(panel.Deps{
		Core: core,
		Who: func(r *http.Request) (string, string, bool) {
			p, ok := auth.FromContext(r.Context())
			if !ok {
				return "", "", false
			}
			return p.User, p.Role.String(), true
		},
		Login: func(w http.ResponseWriter, r *http.Request, user, password string) error {
			_, err := a.LoginHTTP(w, r, user, password)
			return loginError(err)
		},
		Logout:         func(w http.ResponseWriter, r *http.Request) { _ = a.Logout(w, r) },
		TrustedOrigins: o.TrustedOrigins,
		NoUsers:        func(ctx context.Context) bool { first, err := a.NeedsFirstUser(ctx); return err == nil && first },
		ChangePassword: func(ctx context.Context, user, old, new string) error {
			by, ok := auth.FromContext(ctx)
			if !ok || by.User != user {
				return errors.New("log in to change your password")
			}
			return loginError(a.ChangePassword(ctx, by, old, new))
		},
		Accounts:   &accounts{a: a, core: core},
		ClientAddr: a.ClientAddr,
		Started:    started,
		Log:        o.Log,
	})
}

// loginError gives the login page a message it may show.
func loginError(err error) error {
	var rl *auth.RateLimitError
	var inv *auth.InvalidError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, auth.ErrBadCredentials):
		return &panel.LoginError{Msg: "Wrong user name or password."}
	case errors.Is(err, auth.ErrWrongPassword):
		return &panel.LoginError{Msg: "The current password is not right."}
	case errors.As(err, &rl):
		return &panel.LoginError{Msg: rl.Error(), RetryAfter: rl.Seconds()}
	case errors.As(err, &inv):
		return &panel.LoginError{Msg: inv.Error()}
	}
	return err
}

// accounts is the panel's users, tokens and audit screens over auth and the core.
type accounts struct {
	a    *auth.Auth
	core *server.Core
}

func admin(ctx context.Context) *auth.Principal {
	if p, ok := auth.FromContext(ctx); ok {
		return p
	}
	return &auth.Principal{User: "panel", Role: auth.Admin, Via: "panel"}
}

func (x *accounts) ListUsers(ctx context.Context) ([]panel.User, error) {
	us, err := x.a.Users(ctx)
	out := make([]panel.User, 0, len(us))
	for _, u := range us {
		last, lerr := x.core.LastLogin(ctx, u.Name, u.CreatedAt)
		if lerr != nil && err == nil {
			err = lerr
		}
		out = append(out, panel.User{Name: u.Name, Role: u.Role, Created: u.CreatedAt, LastLogin: last})
	}
	return out, err
}

func (x *accounts) AddUser(ctx context.Context, name, role, password string) error {
	r, err := auth.ParseRole(role)
	if err != nil {
		return err
	}
	return x.a.AddUser(ctx, admin(ctx), name, r, password)
}

func (x *accounts) RemoveUser(ctx context.Context, name string) error {
	return x.a.RemoveUser(ctx, admin(ctx), name)
}

func (x *accounts) SetRole(ctx context.Context, name, role string) error {
	r, err := auth.ParseRole(role)
	if err != nil {
		return err
	}
	return x.a.SetRole(ctx, admin(ctx), name, r)
}

func (x *accounts) ResetPassword(ctx context.Context, name, password string) error {
	return x.a.SetPassword(ctx, admin(ctx), name, password)
}

func (x *accounts) ListTokens(ctx context.Context) ([]panel.Token, error) {
	ts, err := x.a.Tokens(ctx)
	out := make([]panel.Token, 0, len(ts))
	for _, t := range ts {
		if t.RevokedAt != nil {
			continue
		}
		pt := panel.Token{ID: t.Prefix, Name: t.Name, User: t.UserName, Created: t.CreatedAt, Director: t.DirectorAt != nil}
		if t.ExpiresAt != nil {
			pt.Expires = *t.ExpiresAt
		}
		if t.LastUsedAt != nil {
			pt.LastUsed = *t.LastUsedAt
		}
		out = append(out, pt)
	}
	return out, err
}

func (x *accounts) CreateToken(ctx context.Context, user, name string, expires time.Duration) (string, string, error) {
	secret, t, err := x.a.CreateToken(ctx, admin(ctx), user, name, expires)
	if err != nil {
		return "", "", err
	}
	return t.Prefix, secret, nil
}

func (x *accounts) RevokeToken(ctx context.Context, id string) error {
	_, err := x.a.RevokeToken(ctx, admin(ctx), id)
	return err
}

func (x *accounts) Audit(ctx context.Context, f panel.AuditFilter) ([]panel.AuditEntry, error) {
	es, err := x.core.Audit(ctx, server.AuditFilter{Actor: f.User, Contains: f.Action, Since: f.Since, Limit: f.Limit})
	out := make([]panel.AuditEntry, 0, len(es))
	for _, e := range es {
		pe := panel.AuditEntry{At: e.At, User: e.Actor, Addr: e.ClientAddr, Via: e.Via, Action: e.Action,
			Detail: strings.TrimSpace(e.Target + " " + e.Detail), OK: e.Outcome == server.OutcomeSuccess}
		if e.Repeats > 1 && e.LastAt != nil {
			pe.Detail += fmt.Sprintf(" (x%d, the last at %s)", e.Repeats, e.LastAt.Local().Format(time.DateTime))
		}
		if e.Revision != nil {
			pe.Revision = *e.Revision
		}
		out = append(out, pe)
	}
	return out, err
}
