package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// CodeLastAdmin refuses to remove or demote the only admin: nobody could
// manage users from the panel or the API any more. It is a refusal of the
// director's (exit status 1, HTTP 409), not an error in what was asked.
const CodeLastAdmin Code = "last_admin"

// Accounts is the users and API tokens: the Core's over its store, or a
// daemon's over HTTP (package client), with the same rules, results and
// errors. Each write is audited as its Actor, and refused below its role
// in Policy (the API's and the panel's routes check that role first).
type Accounts interface {
	Users(ctx context.Context) ([]store.User, error)
	AddUser(ctx context.Context, a Actor, u NewUser) error
	SetUserRole(ctx context.Context, a Actor, name, role string) error
	SetUserPassword(ctx context.Context, a Actor, name, password string) error
	RemoveUser(ctx context.Context, a Actor, name string) error
	Tokens(ctx context.Context) ([]store.Token, error)
	CreateToken(ctx context.Context, a Actor, req TokenRequest) (*CreatedToken, error)
	RevokeToken(ctx context.Context, a Actor, ref string) (*store.Token, error)
}

// NewUser is a user to add. The password travels in a request body only,
// never in a URL, and is never logged or audited.
type NewUser struct {
	Name     string `json:"name"`
	Role     string `json:"role"`
	Password string `json:"password"`
}

// TokenRequest asks for an API token acting as User. Expires is a
// duration (720h) or a number of days (90d); "" lasts until revoked.
type TokenRequest struct {
	User    string `json:"user"`
	Name    string `json:"name,omitempty"`
	Expires string `json:"expires,omitempty"`
	// Director makes a peer director's token (the other director's node
	// set --peer-token-file): over TLS it is taken only from that director,
	// with its believed certificate. A token becomes one anyway at its
	// first call between directors.
	Director bool `json:"director,omitempty"`
}

// CreatedToken is a new token: the secret, shown this once, and what is kept of it.
type CreatedToken struct {
	Token string       `json:"token"`
	Info  *store.Token `json:"info"`
}

var _ Accounts = (*Core)(nil)

// newAccounts is the user and token rules over the core's store: the
// daemon's Auth (its hashing limits shared with logins), or a new one.
func newAccounts(cfg Config, c *Core) *auth.Auth {
	if cfg.Auth != nil {
		return cfg.Auth
	}
	return auth.New(cfg.Store, auth.Config{Log: c.log})
}

// principal is the Actor as auth audits it; only admins reach these methods.
func (a Actor) principal() *auth.Principal {
	return &auth.Principal{User: a.Name, Role: auth.Admin, Via: a.Via, ClientAddr: a.Addr}
}

// Users lists the users (never their hashes).
func (c *Core) Users(ctx context.Context) ([]store.User, error) {
	us, err := c.accounts.Users(ctx)
	return us, accountError(err)
}

// AddUser adds a user who may log in to the panel and hold tokens.
func (c *Core) AddUser(ctx context.Context, a Actor, u NewUser) error {
	if err := allow(a, "user add", RoleFor("user add")); err != nil {
		return err
	}
	role, err := auth.ParseRole(u.Role)
	if err != nil {
		// Refused before a hash is made, and audited as the CLI always did.
		_ = c.accounts.Audit(ctx, a.principal(), "user add", u.Name, nil, err, "")
		return accountError(err)
	}
	return accountError(c.accounts.AddUser(ctx, a.principal(), u.Name, role, u.Password))
}

// SetUserRole changes a user's role; the last admin stays admin.
func (c *Core) SetUserRole(ctx context.Context, a Actor, name, role string) error {
	if err := allow(a, "user set", RoleFor("user set")); err != nil {
		return err
	}
	r, err := auth.ParseRole(role)
	if err != nil {
		_ = c.accounts.Audit(ctx, a.principal(), "user set", name, nil, err, "")
		return accountError(err)
	}
	return accountError(c.accounts.SetRole(ctx, a.principal(), name, r))
}

// SetUserPassword gives a user a new password; the user's sessions end.
func (c *Core) SetUserPassword(ctx context.Context, a Actor, name, password string) error {
	if err := allow(a, "user passwd", RoleFor("user passwd")); err != nil {
		return err
	}
	return accountError(c.accounts.SetPassword(ctx, a.principal(), name, password))
}

// RemoveUser removes a user with its sessions and tokens; the last admin stays.
func (c *Core) RemoveUser(ctx context.Context, a Actor, name string) error {
	if err := allow(a, "user rm", RoleFor("user rm")); err != nil {
		return err
	}
	return accountError(c.accounts.RemoveUser(ctx, a.principal(), name))
}

// Tokens lists the API tokens, revoked ones too (never a secret: none is kept).
func (c *Core) Tokens(ctx context.Context) ([]store.Token, error) {
	ts, err := c.accounts.Tokens(ctx)
	return ts, accountError(err)
}

// CreateToken makes an API token; its secret is in the answer and nowhere else.
func (c *Core) CreateToken(ctx context.Context, a Actor, req TokenRequest) (*CreatedToken, error) {
	if err := allow(a, "token create", RoleFor("token create")); err != nil {
		return nil, err
	}
	ttl, err := ParseExpiry(req.Expires)
	if err != nil {
		return nil, accountError(err)
	}
	create := c.accounts.CreateToken
	if req.Director {
		create = c.accounts.CreateDirectorToken
	}
	secret, t, err := create(ctx, a.principal(), req.User, req.Name, ttl)
	if err != nil {
		return nil, accountError(err)
	}
	return &CreatedToken{Token: secret, Info: t}, nil
}

// RevokeToken revokes the active token whose id, prefix or name is ref.
func (c *Core) RevokeToken(ctx context.Context, a Actor, ref string) (*store.Token, error) {
	if err := allow(a, "token revoke", RoleFor("token revoke")); err != nil {
		return nil, err
	}
	t, err := c.accounts.RevokeToken(ctx, a.principal(), ref)
	return t, accountError(err)
}

// ParseExpiry reads a token's lifetime: a Go duration, or a number of
// days ("90d"); "" is none (until revoked).
func ParseExpiry(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if days, ok := strings.CutSuffix(s, "d"); ok && err != nil {
		if n, nerr := strconv.Atoi(days); nerr == nil && n > 0 && n < 100000 {
			d, err = time.Duration(n)*24*time.Hour, nil
		}
	}
	if err != nil || d <= 0 {
		return 0, &auth.InvalidError{Field: "expires", Message: fmt.Sprintf("%q is not a positive duration (want e.g. 720h or 90d)", s)}
	}
	return d, nil
}

// accountError gives auth's and the store's refusals their kind, so that
// the API's status and the CLI's exit status are those of the director.
func accountError(err error) error {
	var inv *auth.InvalidError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &inv):
		return &Error{Code: CodeBadInput, Msg: err.Error()}
	case errors.Is(err, store.ErrExists):
		return &Error{Code: CodeExists, Msg: err.Error()}
	case errors.Is(err, store.ErrLastAdmin):
		return &Error{Code: CodeLastAdmin, Msg: err.Error()}
	}
	return err
}

// LastLogin is when user last logged in after since (zero: never).
func (c *Core) LastLogin(ctx context.Context, user string, since time.Time) (time.Time, error) {
	return c.store.LastLogin(ctx, user, since)
}
