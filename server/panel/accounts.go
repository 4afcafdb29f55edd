package panel

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
)

type loginData struct {
	NoUsers bool
	Next    string
	User    string
	Error   string
}

func (p *Panel) loginShow(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := p.d.Who(r); ok {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	p.showLogin(w, r, http.StatusOK, &loginData{Next: safeNext(r.URL.Query().Get("next"))})
}

func (p *Panel) showLogin(w http.ResponseWriter, r *http.Request, status int, d *loginData) {
	if p.d.NoUsers != nil {
		d.NoUsers = p.d.NoUsers(r.Context())
	}
	p.render(w, r, status, "login", &page{Title: "Log in", Data: d})
}

func (p *Panel) loginSubmit(w http.ResponseWriter, r *http.Request) {
	user, pass := strings.TrimSpace(r.PostFormValue("user")), r.PostFormValue("password")
	next := safeNext(r.PostFormValue("next"))
	if err := p.d.Login(w, r, user, pass); err != nil {
		// Not a refusal: the server failed (its log says how), and the
		// password may well be right.
		msg, status := "Login failed: the server could not complete it (its log says why). Try again.", http.StatusInternalServerError
		var le *LoginError
		if errors.As(err, &le) {
			msg, status = le.Msg, limitedStatus(w, le, http.StatusUnauthorized)
		} else {
			p.log.Error("panel login", "user", user, "err", err)
		}
		p.showLogin(w, r, status, &loginData{Next: next, User: user, Error: msg})
		return
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// limitedStatus is 429 with Retry-After for a rate-limited attempt, else def.
func limitedStatus(w http.ResponseWriter, le *LoginError, def int) int {
	if le.RetryAfter <= 0 {
		return def
	}
	w.Header().Set("Retry-After", strconv.Itoa(le.RetryAfter))
	return http.StatusTooManyRequests
}

func (p *Panel) logout(w http.ResponseWriter, r *http.Request) {
	p.d.Logout(w, r)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

type accountData struct{ Form *form }

func (p *Panel) accountShow(w http.ResponseWriter, r *http.Request, u who) {
	p.showAccount(w, r, u, http.StatusOK, newForm())
}

func (p *Panel) showAccount(w http.ResponseWriter, r *http.Request, u who, status int, f *form) {
	pg := p.newPage(r.Context(), r, u, "Your account", "")
	pg.Flash = takeFlash(w, r)
	pg.Errors = f.Top
	pg.Data = &accountData{Form: f}
	p.render(w, r, status, "account", pg)
}

func (p *Panel) accountPassword(w http.ResponseWriter, r *http.Request, u who) {
	f := newForm()
	old, nw, again := r.PostFormValue("old"), r.PostFormValue("new"), r.PostFormValue("again")
	switch {
	case p.d.ChangePassword == nil:
		f.Top = append(f.Top, "Changing passwords is not available here.")
	case nw == "":
		f.set("new", "give a new password")
	case nw != again:
		f.set("again", "the two new passwords differ")
	}
	if f.Invalid() {
		p.showAccount(w, r, u, http.StatusUnprocessableEntity, f)
		return
	}
	if err := p.d.ChangePassword(r.Context(), u.User, old, nw); err != nil {
		f.Top = append(f.Top, err.Error())
		status := http.StatusUnprocessableEntity
		var le *LoginError
		if errors.As(err, &le) {
			status = limitedStatus(w, le, status)
		}
		p.showAccount(w, r, u, status, f)
		return
	}
	redirect(w, r, "/account", "Your password was changed.")
}

type usersData struct {
	Users []server.User
	// LastLogins is each user's last login since it was made (missing: never).
	LastLogins map[string]time.Time
	Tokens     []server.Token // the active ones
	Form       *form
	Secret     string
	Roles      []string
}

func (p *Panel) usersShow(w http.ResponseWriter, r *http.Request, u who) {
	p.showUsers(w, r, u, http.StatusOK, newForm(), "")
}

func (p *Panel) showUsers(w http.ResponseWriter, r *http.Request, u who, status int, f *form, secret string) {
	ctx := r.Context()
	pg := p.newPage(ctx, r, u, "Users and tokens", "users")
	pg.Flash = takeFlash(w, r)
	d := &usersData{Form: f, Secret: secret, Roles: []string{auth.Viewer.String(), auth.Operator.String(), auth.Admin.String()},
		LastLogins: map[string]time.Time{}}
	var err error
	if d.Users, err = p.core.Users(ctx); err != nil {
		f.Top = append(f.Top, err.Error())
	}
	for _, us := range d.Users {
		last, err := p.core.LastLogin(ctx, us.Name, us.CreatedAt)
		if err != nil {
			f.Top = append(f.Top, err.Error())
			break
		}
		if !last.IsZero() {
			d.LastLogins[us.Name] = last
		}
	}
	tokens, err := p.core.Tokens(ctx)
	if err != nil {
		f.Top = append(f.Top, err.Error())
	}
	for _, t := range tokens {
		if t.RevokedAt == nil {
			d.Tokens = append(d.Tokens, t)
		}
	}
	pg.Errors = f.Top
	pg.Data = d
	p.render(w, r, status, "users", pg)
}

func (p *Panel) userCreate(w http.ResponseWriter, r *http.Request, u who) {
	f := newForm()
	name, role, pass := strings.TrimSpace(r.PostFormValue("name")), r.PostFormValue("role"), r.PostFormValue("password")
	f.Values["name"], f.Values["role"] = name, role
	if name == "" {
		f.set("name", "give a user name")
	}
	if _, err := auth.ParseRole(role); err != nil {
		f.set("role", "choose viewer, operator or admin")
	}
	if pass == "" {
		f.set("password", "give a password")
	}
	if f.Invalid() {
		p.showUsers(w, r, u, http.StatusUnprocessableEntity, f, "")
		return
	}
	if err := p.core.AddUser(r.Context(), p.actor(r, u), server.NewUser{Name: name, Role: role, Password: pass}); err != nil {
		f.Top = append(f.Top, err.Error())
		p.showUsers(w, r, u, http.StatusUnprocessableEntity, f, "")
		return
	}
	redirect(w, r, "/users", "User "+name+" added as "+role+".")
}

func (p *Panel) userAction(w http.ResponseWriter, r *http.Request, u who) {
	ctx, a := r.Context(), p.actor(r, u)
	name := r.PathValue("name")
	var err error
	var msg string
	switch r.PathValue("action") {
	case "delete":
		if name == u.User {
			p.renderError(w, r, u, http.StatusUnprocessableEntity, "You cannot remove yourself.")
			return
		}
		err, msg = p.core.RemoveUser(ctx, a, name), "User "+name+" removed."
	case "role":
		role := r.PostFormValue("role")
		if _, err := auth.ParseRole(role); err != nil {
			p.renderError(w, r, u, http.StatusUnprocessableEntity, "Choose viewer, operator or admin.")
			return
		}
		err, msg = p.core.SetUserRole(ctx, a, name, role), "User "+name+" is now "+role+"."
	case "password":
		pass := r.PostFormValue("password")
		if pass == "" {
			p.renderError(w, r, u, http.StatusUnprocessableEntity, "Give the new password.")
			return
		}
		err, msg = p.core.SetUserPassword(ctx, a, name, pass), "Password of "+name+" reset."
	default:
		p.renderError(w, r, u, http.StatusNotFound, "No such action.")
		return
	}
	if err != nil {
		f := newForm()
		f.Top = append(f.Top, err.Error())
		p.showUsers(w, r, u, http.StatusUnprocessableEntity, f, "")
		return
	}
	redirect(w, r, "/users", msg)
}

func (p *Panel) tokenCreate(w http.ResponseWriter, r *http.Request, u who) {
	user, name := strings.TrimSpace(r.PostFormValue("user")), strings.TrimSpace(r.PostFormValue("name"))
	f := newForm()
	// Empty or 0 is a token until revoked; anything else not a whole
	// number of days is refused, never taken as "never expires".
	req := server.TokenRequest{User: user, Name: name}
	if v := strings.TrimSpace(r.PostFormValue("days")); v != "" {
		days, err := strconv.Atoi(v)
		if err != nil || days < 0 || days >= 100000 {
			f.Top = append(f.Top, fmt.Sprintf("Expires after (days): %q is not a whole number of days from 0 (never) to 99999; no token was made.", v))
			p.showUsers(w, r, u, http.StatusUnprocessableEntity, f, "")
			return
		}
		if days > 0 {
			req.Expires = strconv.Itoa(days) + "d"
		}
	}
	made, err := p.core.CreateToken(r.Context(), p.actor(r, u), req)
	if err != nil {
		f.Top = append(f.Top, err.Error())
		p.showUsers(w, r, u, http.StatusUnprocessableEntity, f, "")
		return
	}
	// The secret is shown once, in this answer, and never again.
	p.showUsers(w, r, u, http.StatusOK, f, "Token "+made.Info.Prefix+" for "+user+": "+made.Token)
}

func (p *Panel) tokenRevoke(w http.ResponseWriter, r *http.Request, u who) {
	id := r.PathValue("id")
	if _, err := p.core.RevokeToken(r.Context(), p.actor(r, u), id); err != nil {
		p.fail(w, r, u, err)
		return
	}
	redirect(w, r, "/users", "Token "+id+" revoked.")
}

type auditData struct {
	Entries []server.AuditEntry
	Filter  server.AuditFilter
	Since   string
}

func (p *Panel) auditShow(w http.ResponseWriter, r *http.Request, u who) {
	q := r.URL.Query()
	d := &auditData{Filter: server.AuditFilter{Actor: q.Get("user"), Contains: q.Get("action"), Limit: 200}, Since: q.Get("since")}
	pg := p.newPage(r.Context(), r, u, "Audit log", "audit")
	if d.Since != "" {
		if t, err := time.ParseInLocation("2006-01-02", d.Since, time.Local); err == nil {
			d.Filter.Since = t
		} else {
			pg.Errors = append(pg.Errors, "since: want a date like 2026-01-31")
		}
	}
	if es, err := p.core.Audit(r.Context(), d.Filter); err != nil {
		pg.Errors = append(pg.Errors, err.Error())
	} else {
		d.Entries = es
	}
	pg.Data = d
	p.render(w, r, http.StatusOK, "audit", pg)
}
