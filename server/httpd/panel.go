package httpd

import (
	"context"
	"errors"
	"net/http"
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
