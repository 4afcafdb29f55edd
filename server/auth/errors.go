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
// failures (loginGuard), too many successes, or while the password checks
// are busy (hashSlots); no password is checked. Reason says which ("" for
// failures).
type RateLimitError struct {
	RetryAfter time.Duration
	Reason     string
}

func (e *RateLimitError) Error() string {
	why := e.Reason
	if why == "" {
		why = "too many failed logins"
	}
	return fmt.Sprintf("%s: try again in %s", why, max(e.RetryAfter, time.Second).Round(time.Second))
}

// Seconds is the Retry-After header's value (at least 1).
func (e *RateLimitError) Seconds() int {
	s := int((e.RetryAfter + time.Second - 1) / time.Second)
	return max(s, 1)
}

// TokenError refuses a bearer token: unknown, revoked or expired.
type TokenError struct{ Reason string }

func (e *TokenError) Error() string { return "API token " + e.Reason }
