package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/server/httpd"
	"github.com/ipvsctl/ipvsctl/server/panel"
)

// same says what does a panel route's work for a script: API routes
// ("METHOD /api/v1/...") and CLI verbs ("vs add"), or why there are none.
type same struct {
	api, cli []string
	reason   string
}

// panelParity is, for every route of the panel, what a script uses instead.
var panelParity = map[string]same{
	"GET /static/{hash}/*": {reason: "the panel's own stylesheet and scripts"},
	"GET /login":           {reason: "panel sessions: a script authenticates with an API token (ipvsctl token create)"},
	"POST /login":          {reason: "panel sessions: a script authenticates with an API token (ipvsctl token create)"},
	"POST /logout":         {reason: "panel sessions: a script revokes its token instead (ipvsctl token revoke)"},

	"GET /":                       {api: []string{"GET /api/v1/status"}, cli: []string{"status"}},
	"GET /live":                   {api: []string{"GET /api/v1/status"}, cli: []string{"status"}},
	"GET /live/rows":              {api: []string{"GET /api/v1/status"}, cli: []string{"status"}},
	"POST /actions":               {api: []string{"POST /api/v1/services/{id}/servers/{sid}/drain", "POST /api/v1/services/{id}/servers/{sid}/enable", "POST /api/v1/services/{id}/servers/{sid}/disable"}, cli: []string{"rs drain", "rs enable", "rs disable"}},
	"GET /addresses/{addr}":       {api: []string{"GET /api/v1/status"}, cli: []string{"status"}},
	"GET /services":               {api: []string{"GET /api/v1/services"}, cli: []string{"vs list"}},
	"GET /services/new":           {reason: "a form; it posts to POST /services"},
	"POST /services":              {api: []string{"POST /api/v1/services"}, cli: []string{"vs add"}},
	"GET /services/{id}":          {api: []string{"GET /api/v1/services/{id}", "GET /api/v1/charts"}, cli: []string{"vs list", "charts"}},
	"GET /services/{id}/edit":     {reason: "a form; it posts to POST /services/{id}"},
	"POST /services/{id}":         {api: []string{"PATCH /api/v1/services/{id}"}, cli: []string{"vs set"}},
	"POST /services/{id}/enable":  {api: []string{"POST /api/v1/services/{id}/enable"}, cli: []string{"vs enable"}},
	"POST /services/{id}/disable": {api: []string{"POST /api/v1/services/{id}/disable"}, cli: []string{"vs disable"}},
	"POST /services/{id}/delete":  {api: []string{"DELETE /api/v1/services/{id}"}, cli: []string{"vs rm"}},

	"GET /services/{id}/servers/new":          {reason: "a form; it posts to POST /services/{id}/servers"},
	"POST /services/{id}/servers":             {api: []string{"POST /api/v1/services/{id}/servers"}, cli: []string{"rs add"}},
	"GET /services/{id}/servers/{sid}":        {api: []string{"GET /api/v1/services/{id}/servers/{sid}", "GET /api/v1/charts"}, cli: []string{"rs list", "charts"}},
	"GET /services/{id}/servers/{sid}/edit":   {reason: "a form; it posts to POST /services/{id}/servers/{sid}"},
	"POST /services/{id}/servers/{sid}":       {api: []string{"PATCH /api/v1/services/{id}/servers/{sid}"}, cli: []string{"rs set"}},
	"POST /services/{id}/servers/{sid}/check": {api: []string{"POST /api/v1/services/{id}/servers/{sid}/check"}, cli: []string{"health"}},
	// {action} is drain, enable, disable or delete.
	"POST /services/{id}/servers/{sid}/{action}": {api: []string{"POST /api/v1/services/{id}/servers/{sid}/drain", "POST /api/v1/services/{id}/servers/{sid}/enable",
		"POST /api/v1/services/{id}/servers/{sid}/disable", "DELETE /api/v1/services/{id}/servers/{sid}"}, cli: []string{"rs drain", "rs enable", "rs disable", "rs rm"}},
	"GET /services/{id}/servers/{sid}/why": {api: []string{"GET /api/v1/status", "GET /api/v1/health"}, cli: []string{"status", "health"}},

	"GET /settings":             {api: []string{"GET /api/v1/state"}, cli: []string{"export"}},
	"POST /settings":            {api: []string{"PUT /api/v1/state"}, cli: []string{"apply"}},
	"POST /settings/redundancy": {api: []string{"PUT /api/v1/state"}, cli: []string{"apply"}},
	"POST /settings/node":       {api: []string{"PATCH /api/v1/node"}, cli: []string{"node set"}},
	"GET /bgp":                  {api: []string{"GET /api/v1/bgp"}, cli: []string{"node show"}},
	"GET /bgp/body":             {api: []string{"GET /api/v1/bgp"}, cli: []string{"node show"}},
	"POST /bgp/drain":           {api: []string{"PATCH /api/v1/node"}, cli: []string{"node drain"}},
	"POST /bgp/undrain":         {api: []string{"PATCH /api/v1/node"}, cli: []string{"node undrain"}},

	"GET /draft":                   {api: []string{"GET /api/v1/draft", "GET /api/v1/draft/diff"}, cli: []string{"draft show", "draft diff"}},
	"POST /draft/start":            {api: []string{"POST /api/v1/draft/start"}, cli: []string{"draft start"}},
	"POST /draft/apply":            {api: []string{"POST /api/v1/draft/apply"}, cli: []string{"draft apply"}},
	"POST /draft/discard":          {api: []string{"DELETE /api/v1/draft"}, cli: []string{"draft discard"}},
	"GET /tuning":                  {reason: "the director's own kernel settings: ipvsctl tune check, run on the director (it reads that host, not a daemon's API); its load test is GET /api/v1/loadtest/runs, ipvsctl loadtest list"},
	"GET /import":                  {reason: "a form; it posts to POST /import"},
	"POST /import":                 {api: []string{"POST /api/v1/import"}, cli: []string{"import"}},
	"POST /import/apply":           {api: []string{"POST /api/v1/import"}, cli: []string{"import"}},
	"GET /export":                  {api: []string{"GET /api/v1/export"}, cli: []string{"export"}},
	"GET /history":                 {api: []string{"GET /api/v1/history"}, cli: []string{"history"}},
	"GET /events":                  {api: []string{"GET /api/v1/events"}, cli: []string{"events"}},
	"GET /events/rows":             {api: []string{"GET /api/v1/events"}, cli: []string{"events"}},
	"GET /history/{rev}":           {api: []string{"GET /api/v1/history/{rev}"}, cli: []string{"history"}},
	"POST /history/{rev}/rollback": {api: []string{"POST /api/v1/rollback/{rev}"}, cli: []string{"rollback"}},

	"GET /realservers":         {api: []string{"GET /api/v1/status"}, cli: []string{"status"}},
	"POST /realservers/verify": {api: []string{"POST /api/v1/realservers/{op}"}, cli: []string{"realserver verify"}},
	"POST /tuning/realservers": {api: []string{"POST /api/v1/realservers/tune/{op}"}, cli: []string{"realserver tune"}},

	"GET /account": {reason: "a page; its form posts to POST /account/password"},
	"POST /account/password": {reason: "a user's own password, proved by the old one, is a panel session's; " +
		"an admin sets any user's (PUT /api/v1/users/{name}/password, ipvsctl user passwd)"},
	"GET /users":  {api: []string{"GET /api/v1/users", "GET /api/v1/tokens"}, cli: []string{"user list", "token list"}},
	"POST /users": {api: []string{"POST /api/v1/users"}, cli: []string{"user add"}},
	// {action} is delete, role or password.
	"POST /users/{name}/{action}": {api: []string{"DELETE /api/v1/users/{name}", "PATCH /api/v1/users/{name}", "PUT /api/v1/users/{name}/password"},
		cli: []string{"user rm", "user set", "user passwd"}},
	"POST /tokens":             {api: []string{"POST /api/v1/tokens"}, cli: []string{"token create"}},
	"POST /tokens/{id}/revoke": {api: []string{"POST /api/v1/tokens/{ref}/revoke"}, cli: []string{"token revoke"}},
	"GET /audit":               {api: []string{"GET /api/v1/audit"}, cli: []string{"audit"}},
}

// Every route of the panel has an API route and a CLI verb that do its
// work (and they exist), or a reason in panelParity why not: a panel
// action added without either fails here.
func TestEveryPanelActionHasAnAPIRouteAndAVerb(t *testing.T) {
	api := map[string]bool{}
	for _, r := range httpd.Routes() {
		api[r.Method+" "+r.Pattern] = true
	}
	cmds := commands()
	verb := func(v string) bool {
		name, sub, _ := strings.Cut(v, " ")
		c, ok := cmds[name]
		return ok && !c.hidden && (sub == "" && len(c.subs) == 0 || slices.Contains(c.subs, sub)) && c.where[sub] == viaCore
	}
	routes := panel.RoutePatterns()
	if len(routes) < 40 {
		t.Fatalf("the panel has %d routes", len(routes))
	}
	for _, pr := range routes {
		s, ok := panelParity[pr]
		switch {
		case !ok:
			t.Errorf("panel route %q: no API route or CLI verb is named for it in panelParity, and no reason", pr)
			continue
		case s.reason != "" && (len(s.api) > 0 || len(s.cli) > 0):
			t.Errorf("panel route %q: both a reason and routes or verbs", pr)
		case s.reason == "" && (len(s.api) == 0 || len(s.cli) == 0):
			t.Errorf("panel route %q: want an API route and a CLI verb, or a reason: %+v", pr, s)
		}
		for _, a := range s.api {
			if !api[a] {
				t.Errorf("panel route %q: the API has no route %q", pr, a)
			}
		}
		for _, v := range s.cli {
			if !verb(v) {
				t.Errorf("panel route %q: the CLI has no verb %q that goes through the core (with --server, the API)", pr, v)
			}
		}
	}
	for pr := range panelParity {
		if !slices.Contains(routes, pr) {
			t.Errorf("panelParity names %q, which the panel no longer has", pr)
		}
	}
}
