package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
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
	return &Principal{User: t.UserName, Role: role, Via: ViaAPI, ClientAddr: clientAddr, TokenID: t.ID}, nil
}
