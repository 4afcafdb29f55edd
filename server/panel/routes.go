package panel

import (
	"net/http"
	"strings"
)

// Route is one panel page or action: its method, its path pattern (chi's,
// the daemon's one router: {name} a segment, * the rest), and whether it is
// public (no login: the login page and the assets).
type Route struct {
	Method, Pattern string
	Public          bool
	Handler         http.Handler
}

// RouteTable is every panel route, in chi's dialect (the daemon's one
// router: {name} a segment, * the rest). The daemon registers them in its
// router beside the API's (package httpd), which gives every answer the
// security headers, the cross-origin protection and decoded path values
// (package edge); Routes serves them alone, with the same.
func (p *Panel) RouteTable() []Route {
	var out []Route
	p.routes(func(pattern string, h http.HandlerFunc) {
		method, path, _ := strings.Cut(pattern, " ")
		public := path == "/login" || path == "/logout" || strings.HasPrefix(path, "/static/")
		out = append(out, Route{Method: method, Pattern: path, Public: public, Handler: h})
	})
	return out
}

func (p *Panel) routes(handle func(pattern string, h http.HandlerFunc)) {
	mux := muxFunc(handle)
	mux.HandleFunc("GET /static/{hash}/*", p.assets.serve)
	mux.HandleFunc("GET /login", p.loginShow)
	mux.HandleFunc("POST /login", p.loginSubmit)
	mux.HandleFunc("POST /logout", p.logout)

	mux.HandleFunc("GET /", p.loggedIn(p.overviewShow))
	mux.HandleFunc("GET /live", p.loggedIn(p.liveShow))
	mux.HandleFunc("GET /live/rows", p.loggedIn(p.liveRows))
	mux.HandleFunc("POST /actions", p.needTo("rs drain", p.actionsSubmit))
	mux.HandleFunc("GET /addresses/{addr}", p.loggedIn(p.addressShow))

	mux.HandleFunc("GET /services", p.loggedIn(p.serviceList))
	mux.HandleFunc("GET /services/new", p.needTo("vs add", p.serviceNew))
	mux.HandleFunc("POST /services", p.needTo("vs add", p.serviceCreate))
	mux.HandleFunc("GET /services/{id}", p.loggedIn(p.serviceShow))
	mux.HandleFunc("GET /services/{id}/edit", p.needTo("vs set", p.serviceEdit))
	mux.HandleFunc("POST /services/{id}", p.needTo("vs set", p.serviceSave))
	mux.HandleFunc("POST /services/{id}/enable", p.needTo("vs enable", p.serviceEnable))
	mux.HandleFunc("POST /services/{id}/disable", p.needTo("vs disable", p.serviceDisable))
	mux.HandleFunc("POST /services/{id}/delete", p.needTo("vs rm", p.serviceDelete))

	mux.HandleFunc("GET /services/{id}/servers/new", p.needTo("rs add", p.serverNew))
	mux.HandleFunc("POST /services/{id}/servers", p.needTo("rs add", p.serverCreate))
	mux.HandleFunc("GET /services/{id}/servers/{sid}", p.loggedIn(p.serverShow))
	mux.HandleFunc("GET /services/{id}/servers/{sid}/edit", p.needTo("rs set", p.serverEdit))
	mux.HandleFunc("POST /services/{id}/servers/{sid}", p.needTo("rs set", p.serverSave))
	mux.HandleFunc("POST /services/{id}/servers/{sid}/check", p.needTo("rs check", p.serverCheck))
	mux.HandleFunc("POST /services/{id}/servers/{sid}/{action}", p.needTo("rs drain", p.serverAction))
	mux.HandleFunc("GET /services/{id}/servers/{sid}/why", p.needTo("why", p.whyShow))

	mux.HandleFunc("GET /settings", p.loggedIn(p.settingsShow))
	mux.HandleFunc("POST /settings", p.needTo("settings", p.settingsSave))
	mux.HandleFunc("POST /settings/redundancy", p.needTo("settings", p.redundancySave))
	mux.HandleFunc("POST /settings/node", p.needTo("node set", p.nodeSave))

	mux.HandleFunc("GET /draft", p.needTo("draft show", p.draftShow))
	mux.HandleFunc("POST /draft/start", p.needTo("draft stage", p.draftStart))
	mux.HandleFunc("POST /draft/apply", p.needTo("draft apply", p.draftApply))
	mux.HandleFunc("POST /draft/discard", p.needTo("draft discard", p.draftDiscard))

	mux.HandleFunc("GET /history", p.loggedIn(p.historyList))
	mux.HandleFunc("GET /events", p.loggedIn(p.eventsShow))
	mux.HandleFunc("GET /events/rows", p.loggedIn(p.eventsRows))
	mux.HandleFunc("GET /history/{rev}", p.loggedIn(p.historyShow))
	mux.HandleFunc("POST /history/{rev}/rollback", p.needTo("rollback", p.historyRollback))

	mux.HandleFunc("GET /realservers", p.loggedIn(p.realserversShow))
	mux.HandleFunc("GET /tuning", p.loggedIn(p.tuningShow))
	mux.HandleFunc("GET /bgp", p.loggedIn(p.bgpShow))
	mux.HandleFunc("GET /bgp/body", p.loggedIn(p.bgpBody))
	mux.HandleFunc("POST /bgp/drain", p.needTo("node set", p.bgpDrain(true)))
	mux.HandleFunc("POST /bgp/undrain", p.needTo("node set", p.bgpDrain(false)))
	mux.HandleFunc("POST /realservers/verify", p.needTo("realserver", p.realserversVerify))
	mux.HandleFunc("POST /tuning/realservers", p.needTo("realserver tune", p.tuningRealServers))

	mux.HandleFunc("GET /import", p.loggedIn(p.importShow))
	mux.HandleFunc("POST /import", p.needTo("import", p.importPreview))
	mux.HandleFunc("POST /import/apply", p.needTo("import", p.importApply))
	mux.HandleFunc("GET /export", p.loggedIn(p.exportDownload))

	mux.HandleFunc("GET /account", p.loggedIn(p.accountShow))
	mux.HandleFunc("POST /account/password", p.loggedIn(p.accountPassword))
	mux.HandleFunc("GET /users", p.needTo("users", p.usersShow))
	mux.HandleFunc("POST /users", p.needTo("user add", p.userCreate))
	mux.HandleFunc("POST /users/{name}/{action}", p.needTo("user set", p.userAction)) // role, passwd, rm: each an admin's
	mux.HandleFunc("POST /tokens", p.needTo("token create", p.tokenCreate))
	mux.HandleFunc("POST /tokens/{id}/revoke", p.needTo("token revoke", p.tokenRevoke))
	mux.HandleFunc("GET /audit", p.needTo("audit", p.auditShow))
}

// muxFunc gives the route list its HandleFunc.
type muxFunc func(pattern string, h http.HandlerFunc)

func (f muxFunc) HandleFunc(pattern string, h http.HandlerFunc) { f(pattern, h) }
