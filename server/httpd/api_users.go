package httpd

import (
	"net/http"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
)

// remoteRoutes are the routes that let a script do what the panel does
// besides the state: users, tokens (admin) and the charts' series.
// Passwords travel in request bodies only, never in a URL.
func (a *api) remoteRoutes() []auth.Route {
	h := func(f func(w http.ResponseWriter, r *http.Request) error) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := f(w, r); err != nil {
				a.fail(w, r, err)
			}
		})
	}
	const p = "/api/v1"
	return []auth.Route{
		{Method: "GET", Pattern: p + "/users", Role: server.RoleFor("users"), Handler: h(a.listUsers)},
		{Method: "POST", Pattern: p + "/users", Role: server.RoleFor("user add"), Handler: h(a.addUser)},
		{Method: "PATCH", Pattern: p + "/users/{name}", Role: server.RoleFor("user set"), Handler: h(a.setUserRole)},
		{Method: "PUT", Pattern: p + "/users/{name}/password", Role: server.RoleFor("user passwd"), Handler: h(a.setUserPassword)},
		{Method: "DELETE", Pattern: p + "/users/{name}", Role: server.RoleFor("user rm"), Handler: h(a.removeUser)},
		{Method: "GET", Pattern: p + "/tokens", Role: server.RoleFor("users"), Handler: h(a.listTokens)},
		{Method: "POST", Pattern: p + "/tokens", Role: server.RoleFor("token create"), Handler: h(a.createToken)},
		{Method: "POST", Pattern: p + "/tokens/{ref}/revoke", Role: server.RoleFor("token revoke"), Handler: h(a.revokeToken)},
		{Method: "GET", Pattern: p + "/charts", Role: auth.Viewer, Handler: h(a.charts)},
	}
}

func (a *api) listUsers(w http.ResponseWriter, r *http.Request) error {
	us, err := a.core.Users(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, us)
	return nil
}

// userAnswer is what a user write answers: the user, never the password.
type userAnswer struct {
	Name string `json:"name"`
	Role string `json:"role,omitempty"`
}

func (a *api) addUser(w http.ResponseWriter, r *http.Request) error {
	var u server.NewUser
	if err := decode(r, &u); err != nil {
		return err
	}
	if err := a.core.AddUser(r.Context(), actor(r), u); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, userAnswer{Name: u.Name, Role: u.Role})
	return nil
}

func (a *api) setUserRole(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Role string `json:"role"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	name := r.PathValue("name")
	if err := a.core.SetUserRole(r.Context(), actor(r), name, body.Role); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, userAnswer{Name: name, Role: body.Role})
	return nil
}

func (a *api) setUserPassword(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Password string `json:"password"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	name := r.PathValue("name")
	if err := a.core.SetUserPassword(r.Context(), actor(r), name, body.Password); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, userAnswer{Name: name})
	return nil
}

func (a *api) removeUser(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := a.core.RemoveUser(r.Context(), actor(r), name); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, userAnswer{Name: name})
	return nil
}

func (a *api) listTokens(w http.ResponseWriter, r *http.Request) error {
	ts, err := a.core.Tokens(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ts)
	return nil
}

func (a *api) createToken(w http.ResponseWriter, r *http.Request) error {
	var req server.TokenRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	t, err := a.core.CreateToken(r.Context(), actor(r), req)
	if err != nil {
		return err
	}
	// The secret is in this answer and nowhere else: no cache keeps it.
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, t)
	return nil
}

func (a *api) revokeToken(w http.ResponseWriter, r *http.Request) error {
	t, err := a.core.RevokeToken(r.Context(), actor(r), r.PathValue("ref"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

// charts is GET /api/v1/charts?service=ID[&server=ID][&range=hour|day]:
// the series the panel draws on that service's or real server's page.
func (a *api) charts(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	cs, err := a.core.Charts(r.Context(), server.ChartQuery{Service: q.Get("service"), Server: q.Get("server"), Range: q.Get("range")})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, cs)
	return nil
}

// Routes is the API's route table as Handler serves it (without /healthz
// and /metrics): what the tests compare with the panel's routes and the
// CLI's verbs.
func Routes() []auth.Route {
	a := &api{}
	return append(a.routes(), a.remoteRoutes()...)
}
