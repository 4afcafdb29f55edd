package auth

import (
	"context"

	"github.com/ipvsctl/ipvsctl/server/store"
)

// AddUser makes a user with a password that meets the policy. by is audited
// as having made it (so is a refusal).
func (a *Auth) AddUser(ctx context.Context, by *Principal, name string, role Role, password string) (err error) {
	defer func() { _ = a.Audit(ctx, by, "user add", name, nil, err, roleDetail(role, err)) }()
	if err := CheckName("name", name); err != nil {
		return err
	}
	if err := checkUserRole(role); err != nil {
		return err
	}
	if err := CheckPassword(password); err != nil {
		return err
	}
	h, err := a.hash(ctx, password)
	if err != nil {
		return err
	}
	_, err = a.st.CreateUser(ctx, name, role.String(), h, a.now())
	return err
}

// SetPassword gives a user a new password and ends the user's sessions.
func (a *Auth) SetPassword(ctx context.Context, by *Principal, name, password string) (err error) {
	defer func() { _ = a.Audit(ctx, by, "user passwd", name, nil, err, "") }()
	if err := CheckName("name", name); err != nil {
		return err
	}
	return a.setPassword(ctx, name, password)
}

func (a *Auth) setPassword(ctx context.Context, name, password string) error {
	if err := CheckPassword(password); err != nil {
		return err
	}
	h, err := a.hash(ctx, password)
	if err != nil {
		return err
	}
	return a.st.SetUserPassword(ctx, name, h, a.now())
}

// SetRole changes a user's role; it applies to the user's sessions and
// tokens at their next request. The last admin stays admin.
func (a *Auth) SetRole(ctx context.Context, by *Principal, name string, role Role) (err error) {
	defer func() { _ = a.Audit(ctx, by, "user set", name, nil, err, roleDetail(role, err)) }()
	if err := CheckName("name", name); err != nil {
		return err
	}
	if err := checkUserRole(role); err != nil {
		return err
	}
	return a.st.SetUserRole(ctx, name, role.String(), a.now())
}

// RemoveUser removes a user with its sessions and tokens. The last admin
// stays.
func (a *Auth) RemoveUser(ctx context.Context, by *Principal, name string) (err error) {
	defer func() { _ = a.Audit(ctx, by, "user rm", name, nil, err, "") }()
	return a.st.DeleteUser(ctx, name)
}

// Users lists the users (without their hashes).
func (a *Auth) Users(ctx context.Context) ([]store.User, error) { return a.st.Users(ctx) }

// Tokens lists the tokens, revoked ones too (never a secret: none is kept).
func (a *Auth) Tokens(ctx context.Context) ([]store.Token, error) { return a.st.Tokens(ctx) }

func checkUserRole(r Role) error {
	if r < Viewer || r > Admin {
		return &InvalidError{Field: "role", Message: r.String() + " is not a role (want admin, operator or viewer)"}
	}
	return nil
}

func roleDetail(r Role, err error) string {
	if err != nil {
		return ""
	}
	return "role " + r.String()
}

// hash hashes a password, waiting for a hashing slot.
func (a *Auth) hash(ctx context.Context, password string) (string, error) {
	release, err := a.hashes.acquire(ctx, "", "")
	if err != nil {
		return "", err
	}
	defer release()
	a.hashes.counted()
	return HashPassword(a.cfg.Params, password)
}
