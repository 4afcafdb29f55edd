package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/server/store"
)

// A token reads ipvsctl_PPPPPPPP_SECRET: a fixed word (so that secret
// scanners and people recognise it), 8 hex characters of public prefix that
// name it in lists, and 32 random bytes (base64url). Only the SHA-256 of the
// whole token is stored: the secret has 256 bits, so a fast hash is enough.
const (
	tokenWord      = "ipvsctl_"
	tokenPrefixLen = 8
	tokenSecretLen = 43
)

// CreateToken makes an API token for user, named name (default
// USER-PREFIX), valid for ttl (0: until revoked). The token is returned once
// and never again. by is audited as having made it.
func (a *Auth) CreateToken(ctx context.Context, by *Principal, user, name string, ttl time.Duration) (token string, t *store.Token, err error) {
	return a.createToken(ctx, by, user, name, ttl, false)
}

// CreateDirectorToken is CreateToken for a peer director's token (node set
// --peer-token-file on the other director): over TLS it is taken only with
// a director certificate this one believes (Config.CheckDirector).
func (a *Auth) CreateDirectorToken(ctx context.Context, by *Principal, user, name string, ttl time.Duration) (token string, t *store.Token, err error) {
	return a.createToken(ctx, by, user, name, ttl, true)
}

func (a *Auth) createToken(ctx context.Context, by *Principal, user, name string, ttl time.Duration, director bool) (token string, t *store.Token, err error) {
	defer func() { _ = a.Audit(ctx, by, "token create", nameOr(name, user), nil, err, tokenDetail(t)) }()
	if err := CheckName("user", user); err != nil {
		return "", nil, err
	}
	if name != "" {
		if err := CheckName("name", name); err != nil {
			return "", nil, err
		}
	}
	if ttl < 0 {
		return "", nil, &InvalidError{Field: "expires", Message: fmt.Sprintf("%s is negative (want a duration such as 720h, or 0 for none)", ttl)}
	}
	pb := make([]byte, tokenPrefixLen/2)
	if _, err := rand.Read(pb); err != nil {
		return "", nil, fmt.Errorf("token prefix: %w", err)
	}
	prefix := hex.EncodeToString(pb)
	secret, err := randomString(32)
	if err != nil {
		return "", nil, err
	}
	token = tokenWord + prefix + "_" + secret
	if name == "" {
		name = user + "-" + prefix
	}
	now := a.now()
	t = &store.Token{UserName: user, Name: name, Prefix: prefix, Hash: hashSecret(token), CreatedAt: now}
	if ttl > 0 {
		exp := now.Add(ttl)
		t.ExpiresAt = &exp
	}
	if director {
		t.DirectorAt = &now
	}
	if t.ID, err = a.st.CreateToken(ctx, t); err != nil {
		return "", nil, err
	}
	return token, t, nil
}

func nameOr(name, user string) string {
	if name == "" {
		return "token of " + user
	}
	return name
}

func tokenDetail(t *store.Token) string {
	if t == nil {
		return ""
	}
	d := fmt.Sprintf("token %d (%s) for user %s", t.ID, t.Prefix, t.UserName)
	if t.ExpiresAt != nil {
		d += ", expires " + t.ExpiresAt.UTC().Format(time.RFC3339)
	}
	if t.DirectorAt != nil {
		d += ", a director's (taken over TLS only with a believed director certificate)"
	}
	return d
}

// RevokeToken revokes the active token whose id, prefix or name is ref.
func (a *Auth) RevokeToken(ctx context.Context, by *Principal, ref string) (t *store.Token, err error) {
	defer func() { _ = a.Audit(ctx, by, "token revoke", ref, nil, err, tokenDetail(t)) }()
	if t, err = a.st.ActiveToken(ctx, ref); err != nil {
		return nil, err
	}
	now := a.now()
	if err := a.st.RevokeToken(ctx, t.ID, now); err != nil {
		return nil, err
	}
	t.RevokedAt = &now
	return t, nil
}

// tokenPrincipal resolves a bearer token: a *TokenError when it is unknown,
// revoked or expired.
func (a *Auth) tokenPrincipal(ctx context.Context, token, clientAddr string) (*Principal, error) {
	rest, ok := strings.CutPrefix(token, tokenWord)
	if !ok || len(rest) != tokenPrefixLen+1+tokenSecretLen || rest[tokenPrefixLen] != '_' {
		return nil, &TokenError{Reason: "is malformed (want ipvsctl_...)"}
	}
	t, err := a.st.TokenByPrefix(ctx, rest[:tokenPrefixLen])
	if errors.Is(err, store.ErrNotFound) {
		return nil, &TokenError{Reason: "is not known"}
	}
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare([]byte(hashSecret(token)), []byte(t.Hash)) != 1 {
		return nil, &TokenError{Reason: "is not known"}
	}
	now := a.now()
	if t.RevokedAt != nil {
		return nil, &TokenError{Reason: "was revoked"}
	}
	if t.ExpiresAt != nil && !now.Before(*t.ExpiresAt) {
		return nil, &TokenError{Reason: "has expired"}
	}
	role, err := ParseRole(t.Role)
	if err != nil {
		return nil, err
	}
	if t.LastUsedAt == nil || now.Sub(*t.LastUsedAt) >= touchEvery {
		if err := a.st.TouchToken(ctx, t.ID, now); err != nil {
			a.cfg.Log.Warn("record token use", "token", t.Prefix, "err", err)
		}
	}
	return &Principal{User: t.UserName, Role: role, Via: ViaAPI, ClientAddr: clientAddr, TokenID: t.ID, Director: t.DirectorAt != nil}, nil
}

type directorCallKey struct{}

// WithDirectorCall marks ctx as a call between directors that the caller's
// certificate proved (what only a director calls: replication's long poll,
// its fingerprint reports): the token it brings becomes a director's
// (Principal.Director), if it was not one already, and is audited so.
func WithDirectorCall(ctx context.Context) context.Context {
	return context.WithValue(ctx, directorCallKey{}, true)
}

// directorToken marks p's token a director's when r is a call between
// directors that the caller's certificate proved (WithDirectorCall), and
// audits it the first time.
func (a *Auth) directorToken(r *http.Request, p *Principal) (*Principal, error) {
	if p.TokenID == 0 || p.Director || r.Context().Value(directorCallKey{}) == nil {
		return p, nil
	}
	marked, err := a.st.MarkTokenDirector(r.Context(), p.TokenID, a.now())
	if err != nil {
		return nil, err
	}
	if marked {
		_ = a.Audit(r.Context(), p, "token director", strconv.FormatInt(p.TokenID, 10), nil, nil,
			"its first call between directors: over TLS it is now taken only with a believed director certificate")
	}
	p.Director = true
	return p, nil
}
