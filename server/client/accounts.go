package client

import (
	"context"
	"net/url"

	"github.com/ipvsctl/ipvsctl/server"
)

// Users lists the daemon's users.
func (c *Client) Users(ctx context.Context) ([]server.User, error) {
	var out []server.User
	if _, err := c.do(ctx, "GET", "/api/v1/users", nil, nil, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// AddUser adds a user; the password goes in the body.
func (c *Client) AddUser(ctx context.Context, _ server.Actor, u server.NewUser) error {
	_, err := c.do(ctx, "POST", "/api/v1/users", nil, nil, jsonBody(u), nil)
	return err
}

// SetUserRole changes a user's role.
func (c *Client) SetUserRole(ctx context.Context, _ server.Actor, name, role string) error {
	_, err := c.do(ctx, "PATCH", "/api/v1/users/"+esc(name), nil, nil, jsonBody(map[string]string{"role": role}), nil)
	return err
}

// SetUserPassword gives a user a new password, sent in the body.
func (c *Client) SetUserPassword(ctx context.Context, _ server.Actor, name, password string) error {
	_, err := c.do(ctx, "PUT", "/api/v1/users/"+esc(name)+"/password", nil, nil, jsonBody(map[string]string{"password": password}), nil)
	return err
}

// RemoveUser removes a user with its sessions and tokens.
func (c *Client) RemoveUser(ctx context.Context, _ server.Actor, name string) error {
	_, err := c.do(ctx, "DELETE", "/api/v1/users/"+esc(name), nil, nil, nil, nil)
	return err
}

// Tokens lists the daemon's API tokens (never a secret).
func (c *Client) Tokens(ctx context.Context) ([]server.Token, error) {
	var out []server.Token
	if _, err := c.do(ctx, "GET", "/api/v1/tokens", nil, nil, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// CreateToken makes a token on the daemon; its secret is in the answer only.
func (c *Client) CreateToken(ctx context.Context, _ server.Actor, req server.TokenRequest) (*server.CreatedToken, error) {
	var out server.CreatedToken
	if _, err := c.do(ctx, "POST", "/api/v1/tokens", nil, nil, jsonBody(req), &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RevokeToken revokes a token by id, prefix or name.
func (c *Client) RevokeToken(ctx context.Context, _ server.Actor, ref string) (*server.Token, error) {
	var out server.Token
	if _, err := c.do(ctx, "POST", "/api/v1/tokens/"+esc(ref)+"/revoke", nil, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Charts reads a chart's series from the daemon.
func (c *Client) Charts(ctx context.Context, q server.ChartQuery) (*server.ChartSeries, error) {
	v := url.Values{"service": {q.Service}}
	if q.Server != "" {
		v.Set("server", q.Server)
	}
	if q.Range != "" {
		v.Set("range", q.Range)
	}
	var out server.ChartSeries
	if _, err := c.do(ctx, "GET", "/api/v1/charts", v, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
