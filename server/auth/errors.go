package auth

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrBadCredentials is every failed login, whatever the reason, so that
	// the answer does not tell whether the user exists.
	ErrBadCredentials = errors.New("wrong user name or password")
	// ErrWrongPassword refuses a password change whose current password is wrong.
	ErrWrongPassword = errors.New("the current password is not right")
	// ErrUnauthenticated means a request carried no valid session or token.
	ErrUnauthenticated = errors.New("log in first (a session cookie, or an API token in Authorization: Bearer ...)")
)

// InvalidError is input refused by a policy: Field names it (name, role,
// password, expires), Message says why, with the value where it is not a
// secret. The API answers it with 422 and the field; the CLI exits 2.
type InvalidError struct {
	Field   string
	Message string
}

func (e *InvalidError) Error() string { return e.Field + ": " + e.Message }

// RateLimitError refuses a login or password change after too many
// failures (loginGuard); no password is checked while it lasts.
type RateLimitError struct {
	RetryAfter time.Duration
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("too many failed logins: try again in %s", e.RetryAfter.Round(time.Second))
}

// Seconds is the Retry-After header's value (at least 1).
func (e *RateLimitError) Seconds() int {
	s := int((e.RetryAfter + time.Second - 1) / time.Second)
	return max(s, 1)
}

// TokenError refuses a bearer token: unknown, revoked or expired.
type TokenError struct{ Reason string }

func (e *TokenError) Error() string { return "API token " + e.Reason }
