package panel

import "net/http"

func (p *Panel) routes(mux *http.ServeMux) {
	const V, O, A = RoleViewer, RoleOperator, RoleAdmin
	mux.HandleFunc("GET /static/{hash}/{name...}", p.assets.serve)
	mux.HandleFunc("GET /login", p.loginShow)
	mux.HandleFunc("POST /login", p.loginSubmit)
	mux.HandleFunc("POST /logout", p.logout)

	mux.HandleFunc("GET /{$}", p.need(V, p.overviewShow))
	mux.HandleFunc("GET /live", p.need(V, p.liveShow))
	mux.HandleFunc("GET /live/rows", p.need(V, p.liveRows))
	mux.HandleFunc("POST /actions", p.need(O, p.actionsSubmit))
	mux.HandleFunc("GET /addresses/{addr}", p.need(V, p.addressShow))

	mux.HandleFunc("GET /services", p.need(V, p.serviceList))
	mux.HandleFunc("GET /services/new", p.need(A, p.serviceNew))
	mux.HandleFunc("POST /services", p.need(A, p.serviceCreate))
	mux.HandleFunc("GET /services/{id}", p.need(V, p.serviceShow))
	mux.HandleFunc("GET /services/{id}/edit", p.need(A, p.serviceEdit))
	mux.HandleFunc("POST /services/{id}", p.need(A, p.serviceSave))
	mux.HandleFunc("POST /services/{id}/enable", p.need(O, p.serviceEnable))
	mux.HandleFunc("POST /services/{id}/disable", p.need(O, p.serviceDisable))
	mux.HandleFunc("POST /services/{id}/delete", p.need(A, p.serviceDelete))

	mux.HandleFunc("GET /services/{id}/servers/new", p.need(A, p.serverNew))
	mux.HandleFunc("POST /services/{id}/servers", p.need(A, p.serverCreate))
	mux.HandleFunc("GET /services/{id}/servers/{sid}", p.need(V, p.serverShow))
	mux.HandleFunc("GET /services/{id}/servers/{sid}/edit", p.need(O, p.serverEdit))
	mux.HandleFunc("POST /services/{id}/servers/{sid}", p.need(O, p.serverSave))
	mux.HandleFunc("POST /services/{id}/servers/{sid}/check", p.need(O, p.serverCheck))
	mux.HandleFunc("POST /services/{id}/servers/{sid}/{action}", p.need(O, p.serverAction))
	mux.HandleFunc("GET /services/{id}/servers/{sid}/why", p.need(V, p.whyShow))

	mux.HandleFunc("GET /settings", p.need(V, p.settingsShow))
	mux.HandleFunc("POST /settings", p.need(A, p.settingsSave))
	mux.HandleFunc("POST /settings/redundancy", p.need(A, p.redundancySave))
	mux.HandleFunc("POST /settings/node", p.need(A, p.nodeSave))

	mux.HandleFunc("GET /draft", p.need(V, p.draftShow))
	mux.HandleFunc("POST /draft/start", p.need(A, p.draftStart))
	mux.HandleFunc("POST /draft/apply", p.need(A, p.draftApply))
	mux.HandleFunc("POST /draft/discard", p.need(A, p.draftDiscard))

	mux.HandleFunc("GET /history", p.need(V, p.historyList))
	mux.HandleFunc("GET /history/{rev}", p.need(V, p.historyShow))
	mux.HandleFunc("POST /history/{rev}/rollback", p.need(A, p.historyRollback))

	mux.HandleFunc("GET /realservers", p.need(V, p.realserversShow))
	mux.HandleFunc("GET /tuning", p.need(V, p.tuningShow))
	mux.HandleFunc("POST /realservers/verify", p.need(A, p.realserversVerify))

	mux.HandleFunc("GET /import", p.need(V, p.importShow))
	mux.HandleFunc("POST /import", p.need(A, p.importPreview))
	mux.HandleFunc("POST /import/apply", p.need(A, p.importApply))
	mux.HandleFunc("GET /export", p.need(V, p.exportDownload))

	mux.HandleFunc("GET /account", p.need(V, p.accountShow))
	mux.HandleFunc("POST /account/password", p.need(V, p.accountPassword))
	mux.HandleFunc("GET /users", p.need(A, p.usersShow))
	mux.HandleFunc("POST /users", p.need(A, p.userCreate))
	mux.HandleFunc("POST /users/{name}/{action}", p.need(A, p.userAction))
	mux.HandleFunc("POST /tokens", p.need(A, p.tokenCreate))
	mux.HandleFunc("POST /tokens/{id}/revoke", p.need(A, p.tokenRevoke))
	mux.HandleFunc("GET /audit", p.need(A, p.auditShow))
}
