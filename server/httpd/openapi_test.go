package httpd

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/internal/schemagen"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/stateschema"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/events"
	"github.com/ipvsctl/ipvsctl/server/store"
)

var update = flag.Bool("update", false, "rewrite openapi.json and docs/openapi.json from the route table and the description")

// The files the document is written to: the embedded copy and the docs' one.
var openAPIOutputs = []string{"openapi.json", "../../docs/openapi.json"}

const schemas = "#/components/schemas/"

// A body is a request's or a response's content: a Go type (its schema by
// reflection), or a schema given here, in a media type.
type body struct {
	typ    reflect.Type
	schema map[string]any
	media  []string // default application/json
	// extra are other media types with schemas of their own (an event stream).
	extra map[string]map[string]any
}

func typeOf[T any]() *body { return &body{typ: reflect.TypeFor[T]()} }

func ref(name string) *body { return &body{schema: map[string]any{"$ref": schemas + name}} }

func text() *body {
	return &body{schema: map[string]any{"type": "string"}, media: []string{"text/plain"}}
}

// param is a query parameter, a header or a path parameter (by its name in
// the pattern, found there).
type param struct {
	name, in, desc string
	schema         map[string]any
}

func q(name, typ, desc string) param {
	return param{name: name, in: "query", desc: desc, schema: map[string]any{"type": typ}}
}

// op describes one route; its method, pattern and role come from the route table.
type op struct {
	summary, desc, tag string
	params             []param
	req                *body
	reqOptional        bool
	resp               *body // nil: 204 No Content
	etag               bool  // the response carries the revision as its ETag
	write              bool  // takes the write options (apply, draft, wait, If-Match)
	// also are other answers with a body (status code -> description, body)
	also map[string]answer
}

type answer struct {
	desc string
	body *body
}

var (
	writeParams = []param{
		q("apply", "boolean", "false: store the revision without reconciling the kernel now"),
		q("draft", "boolean", "true: stage the change in the caller's draft instead of applying it"),
		q("wait", "boolean", "true: answer after the reconcile (and the drains it starts) has finished"),
		{name: "If-Match", in: "header", desc: `the revision ("7") the change is based on: refused with 409 if another change came first`, schema: map[string]any{"type": "string"}},
	}
	pathDesc = map[string]string{
		"id":     "the service: its name, or its key (tcp:198.18.0.100:80, fwmark:7)",
		"sid":    "the real server: its name, or its address[:port]",
		"author": "the user whose draft it is",
		"rev":    "a revision number",
		"op":     "the operation",
		"name":   "the user's name",
		"ref":    "the token: its name or id",
	}
	pathEnum = map[string]map[string][]string{
		"/api/v1/realservers/{op}":      {"op": {server.RealServerPush, server.RealServerVerify, server.RealServerUndo}},
		"/api/v1/realservers/tune/{op}": {"op": {server.RealServerTuneCheck, server.RealServerTunePush, server.RealServerTuneUndo}},
	}
)

func withWrite(ps ...param) []param { return append(ps, writeParams...) }

// description is every route's operation: TestOpenAPICoversEveryRoute fails
// when a route has none, or one names no route.
var description = map[string]op{
	"GET /api/v1/state": {tag: "state", summary: "The desired state", etag: true, resp: ref("State"),
		desc:   "The whole desired-state document (docs/state.schema.json). With ?after=N it is a long poll: it answers when the revision passes N (or after a minute with the current one), with the revision's time, author, content hash and node in X-Ipvsctl-* headers.",
		params: []param{q("after", "integer", "wait until the revision is past this one (a long poll)")}},
	"PUT /api/v1/state": {tag: "state", summary: "Replace the desired state", req: ref("State"), resp: typeOf[server.WriteResult](), etag: true, write: true,
		params: []param{q("label", "string", "the revision's label in the history")}},
	"GET /api/v1/diff":  {tag: "state", summary: "Desired state against the kernel", resp: typeOf[server.DiffResult]()},
	"POST /api/v1/diff": {tag: "state", summary: "A document against the kernel (a dry run: it is validated, not stored)", req: ref("State"), resp: typeOf[server.DiffResult]()},
	"GET /api/v1/services": {tag: "services", summary: "The virtual services", etag: true,
		resp: &body{schema: map[string]any{"type": []any{"array", "null"}, "items": map[string]any{"$ref": schemas + "Service"}}}},
	"POST /api/v1/services":                            {tag: "services", summary: "Add a virtual service", req: ref("Service"), resp: typeOf[server.WriteResult](), write: true},
	"GET /api/v1/services/{id}":                        {tag: "services", summary: "One virtual service", resp: ref("Service"), etag: true},
	"PATCH /api/v1/services/{id}":                      {tag: "services", summary: "Change a virtual service's fields", req: typeOf[server.ServicePatch](), resp: typeOf[server.WriteResult](), write: true},
	"DELETE /api/v1/services/{id}":                     {tag: "services", summary: "Remove a virtual service", resp: typeOf[server.WriteResult](), write: true},
	"POST /api/v1/services/{id}/enable":                {tag: "services", summary: "Enable a virtual service", resp: typeOf[server.WriteResult](), write: true},
	"POST /api/v1/services/{id}/disable":               {tag: "services", summary: "Disable a virtual service (out of the kernel, kept in the state)", resp: typeOf[server.WriteResult](), write: true},
	"GET /api/v1/services/{id}/servers":                {tag: "servers", summary: "A service's real servers", etag: true, resp: &body{schema: map[string]any{"type": []any{"array", "null"}, "items": map[string]any{"$ref": schemas + "Server"}}}},
	"POST /api/v1/services/{id}/servers":               {tag: "servers", summary: "Add a real server", req: ref("Server"), resp: typeOf[server.WriteResult](), write: true},
	"GET /api/v1/services/{id}/servers/{sid}":          {tag: "servers", summary: "One real server", resp: ref("Server"), etag: true},
	"PATCH /api/v1/services/{id}/servers/{sid}":        {tag: "servers", summary: "Change a real server's fields (weight, health forced up or down, ...)", req: typeOf[server.ServerPatch](), resp: typeOf[server.WriteResult](), write: true},
	"DELETE /api/v1/services/{id}/servers/{sid}":       {tag: "servers", summary: "Remove a real server (kept at weight 0 until idle or settings.retire_timeout)", resp: typeOf[server.WriteResult](), write: true},
	"POST /api/v1/services/{id}/servers/{sid}/drain":   {tag: "servers", summary: "Drain a real server: no new connections, the established ones kept", resp: typeOf[server.WriteResult](), write: true},
	"POST /api/v1/services/{id}/servers/{sid}/enable":  {tag: "servers", summary: "Enable a real server", resp: typeOf[server.WriteResult](), write: true},
	"POST /api/v1/services/{id}/servers/{sid}/disable": {tag: "servers", summary: "Disable a real server (maintenance)", resp: typeOf[server.WriteResult](), write: true},
	"POST /api/v1/services/{id}/servers/{sid}/check":   {tag: "health", summary: "Run a real server's health check now", resp: typeOf[server.CheckResult]()},
	"GET /api/v1/services/{id}/servers/{sid}/why":      {tag: "health", summary: "Why a real server gets traffic or not", resp: typeOf[server.Why]()},
	"GET /api/v1/settings":                             {tag: "state", summary: "The director-wide settings", resp: ref("Settings"), etag: true},
	"PATCH /api/v1/settings":                           {tag: "state", summary: "Change settings", req: typeOf[server.SettingsPatch](), resp: typeOf[server.WriteResult](), write: true},
	"GET /api/v1/drafts":                               {tag: "drafts", summary: "Everyone's drafts", resp: typeOf[[]server.DraftInfo]()},
	"GET /api/v1/drafts/{author}":                      {tag: "drafts", summary: "A user's draft document", resp: ref("State")},
	"GET /api/v1/drafts/{author}/diff":                 {tag: "drafts", summary: "What a user's draft changes", resp: typeOf[server.DraftDiff]()},
	"GET /api/v1/draft":                                {tag: "drafts", summary: "The caller's draft document", resp: ref("State")},
	"GET /api/v1/draft/diff":                           {tag: "drafts", summary: "What the caller's draft changes", resp: typeOf[server.DraftDiff]()},
	"POST /api/v1/draft/start":                         {tag: "drafts", summary: "Start the caller's draft from the current state (kept if there is one)", resp: typeOf[server.DraftInfo]()},
	"POST /api/v1/draft/apply": {tag: "drafts", summary: "Apply the caller's draft as one revision", resp: typeOf[server.WriteResult](), write: true,
		params: []param{q("label", "string", "the revision's label in the history")}},
	"DELETE /api/v1/draft": {tag: "drafts", summary: "Discard the caller's draft"},
	"GET /api/v1/status":   {tag: "status", summary: "What the kernel has now, with counters and health", resp: typeOf[server.StatusView]()},
	"GET /api/v1/health": {tag: "health", summary: "The health checks' latest results", resp: typeOf[[]server.HealthReport](),
		params: []param{q("service", "string", "only this service's"), q("server", "string", "only this real server's"), q("limit", "integer", "results per real server (default 20)")}},
	"GET /api/v1/history": {tag: "history", summary: "The latest revisions", resp: typeOf[[]store.Revision](),
		params: []param{q("limit", "integer", "how many (default 20)")}},
	"GET /api/v1/events": {tag: "status", summary: "What the director told of: real servers down and back, VRRP and BGP changes, revisions stored",
		desc: "The events after `after` (or the `Last-Event-ID` header) that `type` and `subject` select, oldest first. " +
			"With `Accept: text/event-stream` the answer is a stream of Server-Sent Events: those, then each new one as it happens " +
			"(`id:` the event's ID, `event:` its type, `data:` the event as JSON, as in the JSON answer), with a comment every 15 s. " +
			"A reader that falls more than 256 events behind gets `event: dropped` and the stream ends: reconnect with Last-Event-ID to catch up. " +
			"At most 8 streams per user. Types: " + strings.Join(events.Types, ", ") + ".",
		resp: &body{typ: reflect.TypeFor[EventList](), extra: map[string]map[string]any{"text/event-stream": {"type": "string"}}},
		params: []param{q("after", "integer", "only the events with a greater ID (default 0: the oldest kept)"),
			{name: "type", in: "query", desc: "only these types (comma-separated, or repeated; a prefix such as realserver. selects a kind)", schema: map[string]any{"type": "string"}},
			q("subject", "string", "only events whose subject contains this (a real server's address, a service, a prefix, a router)"),
			{name: "Last-Event-ID", in: "header", desc: "the ID an EventSource resumes after (as after)", schema: map[string]any{"type": "string"}}}},
	"GET /api/v1/history/{rev}":   {tag: "history", summary: "One revision: its document and what it changed", resp: typeOf[server.RevisionDetail]()},
	"POST /api/v1/rollback/{rev}": {tag: "history", summary: "Make a past revision's document the desired state again (a new revision)", resp: typeOf[server.WriteResult](), write: true},
	"GET /api/v1/export": {tag: "state", summary: "The desired state in a format (json, ipvsadm, lvs.cf, keepalived)",
		resp:   &body{schema: map[string]any{}, media: []string{"application/json", "text/plain"}},
		params: []param{q("format", "string", "json (the default), ipvsadm, lvs.cf or keepalived")}},
	"POST /api/v1/import": {tag: "state", summary: "Import a configuration file (the body) as the desired state", write: true,
		req: &body{schema: map[string]any{"type": "string"}, media: []string{"text/plain", "application/json"}}, resp: typeOf[server.ImportResult](),
		params: []param{q("format", "string", "json, ipvsadm, lvs.cf or keepalived"), q("name", "string", "the file's name, for the report"),
			q("ignore_unknown", "boolean", "go on past keywords the format's own tool does not know (listed in the report)"),
			q("allow_empty", "boolean", "take a file without services (it empties the desired state)"),
			q("config_id", "string", "keepalived: the configuration id (keepalived's -i) that @ID lines are read for (default: the director's host name up to its first dot)")}},
	"GET /api/v1/audit": {tag: "accounts", summary: "The audit log: who did what, from where", resp: typeOf[[]store.AuditEntry](),
		params: []param{q("actor", "string", "only this user's"), q("action", "string", "only this action's"),
			{name: "since", in: "query", desc: "only entries after this time (RFC 3339)", schema: map[string]any{"type": "string", "format": "date-time"}},
			q("limit", "integer", "how many (default 100)")}},
	"GET /api/v1/node":   {tag: "node", summary: "This director's own settings (outside the replicated document)", resp: typeOf[server.NodeView]()},
	"PATCH /api/v1/node": {tag: "node", summary: "Change this director's own settings", req: typeOf[server.NodePatch](), resp: typeOf[server.NodeView]()},
	"GET /api/v1/bgp":    {tag: "node", summary: "The BGP speaker: its sessions and routes", resp: typeOf[server.BGPStatus]()},
	"POST /api/v1/bgp/fingerprints": {tag: "node", summary: "A peer director reports the certificate fingerprints it believes (directors only, over mutual TLS)",
		req: typeOf[server.FingerprintReport](), resp: typeOf[server.FingerprintSet]()},
	"POST /api/v1/realservers/{op}": {tag: "realservers", summary: "Push, verify or undo the real servers' preparation (ARP hiding, tunnels) over SSH",
		req: typeOf[server.RealServerSelection](), reqOptional: true, resp: typeOf[server.RealServerReport]()},
	"POST /api/v1/realservers/tune/{op}": {tag: "realservers", summary: "Check, push or undo the real servers' tuning over SSH",
		req: typeOf[server.RealServerTuneRequest](), reqOptional: true, resp: typeOf[server.RealServerTuneReport]()},
	"GET /api/v1/loadtest/runs": {tag: "loadtest", summary: "Load test runs", resp: typeOf[[]server.LoadRun](),
		params: []param{q("test", "string", "only this test's runs")}},
	"POST /api/v1/loadtest/runs":          {tag: "loadtest", summary: "Start a load test run", req: typeOf[server.LoadRunStart](), resp: typeOf[server.LoadRun]()},
	"POST /api/v1/loadtest/runs/{id}/end": {tag: "loadtest", summary: "End a load test run with its results", req: typeOf[server.LoadResult](), resp: typeOf[server.LoadRun]()},
	"GET /healthz":                        {tag: "status", summary: "Liveness: the daemon is up (and whether it has the kernel's IPVS)", resp: text()},
	"GET /readyz": {tag: "status", summary: "Readiness: every check has run once since the start and its results are on the kernel (200), or not yet (503, saying how many checks have not run)",
		resp: typeOf[server.CheckerStatus](), also: map[string]answer{"503": {"Not ready yet: the body says what it waits for", typeOf[server.CheckerStatus]()}}},
	"GET /api/v1/users":  {tag: "accounts", summary: "The users", resp: typeOf[[]store.User]()},
	"POST /api/v1/users": {tag: "accounts", summary: "Add a user", req: typeOf[server.NewUser](), resp: typeOf[userAnswer]()},
	"PATCH /api/v1/users/{name}": {tag: "accounts", summary: "Change a user's role", resp: typeOf[userAnswer](),
		req: &body{schema: map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{"role": map[string]any{"type": "string"}}}}},
	"PUT /api/v1/users/{name}/password": {tag: "accounts", summary: "Set a user's password", resp: typeOf[userAnswer](),
		req: &body{schema: map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{"password": map[string]any{"type": "string"}}}}},
	"DELETE /api/v1/users/{name}":      {tag: "accounts", summary: "Remove a user", resp: typeOf[userAnswer]()},
	"GET /api/v1/tokens":               {tag: "accounts", summary: "The API tokens (never their secrets)", resp: typeOf[[]store.Token]()},
	"POST /api/v1/tokens":              {tag: "accounts", summary: "Create an API token (its secret is shown once)", req: typeOf[server.TokenRequest](), resp: typeOf[server.CreatedToken]()},
	"POST /api/v1/tokens/{ref}/revoke": {tag: "accounts", summary: "Revoke an API token", resp: typeOf[store.Token]()},
	"GET /api/v1/charts": {tag: "status", summary: "Time series of a service's (or real server's) rates, for the panel's charts", resp: typeOf[server.ChartSeries](),
		params: []param{q("service", "string", "the service"), q("server", "string", "one of its real servers"), q("range", "string", "hour (the default), day or week")}},
	"GET /api/v1/openapi.json": {tag: "status", summary: "This document", resp: &body{schema: map[string]any{"type": "object"}}},
	"GET /metrics":             {tag: "status", summary: "Prometheus metrics (text exposition format)", resp: text()},
}

var tags = []struct{ name, desc string }{
	{"state", "The desired-state document and its settings: read, replace, diff, export, import."},
	{"services", "Virtual services, one at a time."},
	{"servers", "A service's real servers, one at a time."},
	{"health", "Health checks: results, a check run now, why a server gets traffic."},
	{"drafts", "Drafts: changes staged by one user and applied as one revision."},
	{"history", "Revisions of the desired state, and rollback."},
	{"status", "What runs: the kernel's table, charts, liveness, metrics, this document."},
	{"node", "This director: its own settings, BGP, peers."},
	{"realservers", "Real-server preparation and tuning over SSH."},
	{"loadtest", "Load test runs and their results."},
	{"accounts", "Users, API tokens and the audit log."},
}

// openAPIRoutes is the route table the document describes (the metrics
// route is there when the daemon serves metrics on its API port).
func openAPIRoutes() []auth.Route {
	o := Options{Metrics: http.NotFoundHandler()}
	return o.routeTable(&api{})
}

func generateOpenAPI(t *testing.T) []byte {
	t.Helper()
	defs, _ := stateschema.Defs(schemas)
	known := map[reflect.Type]map[string]any{
		reflect.TypeFor[auth.Role]():           {"type": "string", "enum": []any{"viewer", "operator", "admin"}},
		reflect.TypeFor[ipvsmgr.ServiceKey]():  {"type": "string", "description": "the service's kernel key, as ipvsadm writes it (-t 198.18.0.100:80)"},
		reflect.TypeFor[ipvsmgr.DestKey]():     {"type": "string", "description": "the real server's address:port"},
		reflect.TypeFor[netip.Addr]():          {"type": "string", "description": "an IP address"},
		reflect.TypeFor[netip.Prefix]():        {"type": "string", "description": "an IP prefix"},
		reflect.TypeFor[ipvsmgr.Argv]():        {"oneOf": []any{map[string]any{"type": "array", "items": map[string]any{"type": "string"}}, map[string]any{"type": "string"}}},
		reflect.TypeFor[ipvsmgr.Service]():     {"$ref": schemas + "Service"},
		reflect.TypeFor[ipvsmgr.Server]():      {"$ref": schemas + "Server"},
		reflect.TypeFor[ipvsmgr.State]():       {"$ref": schemas + "State"},
		reflect.TypeFor[ipvsmgr.Settings]():    {"$ref": schemas + "Settings"},
		reflect.TypeFor[ipvsmgr.Check]():       {"$ref": schemas + "Check"},
		reflect.TypeFor[ipvsmgr.Match]():       {"$ref": schemas + "Match"},
		reflect.TypeFor[ipvsmgr.SorryServer](): {"$ref": schemas + "SorryServer"},
		reflect.TypeFor[ipvsmgr.Redundancy]():  {"$ref": schemas + "Redundancy"},
		reflect.TypeFor[ipvsmgr.BGP]():         {"$ref": schemas + "BGP"},
		reflect.TypeFor[ipvsmgr.ImportedKey](): {"$ref": schemas + "ImportedKey"},
	}
	g := &schemagen.Generator{Prefix: schemas, Known: known, Defs: defs}
	schemaOf := func(b *body) map[string]any {
		if b.schema != nil {
			return b.schema
		}
		s, err := g.Schema(b.typ)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	content := func(b *body) map[string]any {
		media := b.media
		if media == nil {
			media = []string{"application/json"}
		}
		out := map[string]any{}
		for _, m := range media {
			out[m] = map[string]any{"schema": schemaOf(b)}
		}
		for m, sc := range b.extra {
			out[m] = map[string]any{"schema": sc}
		}
		return out
	}
	errBody, err := g.Schema(reflect.TypeFor[ErrorBody]())
	if err != nil {
		t.Fatal(err)
	}
	_ = errBody
	errDef := g.Defs["ErrorBody"].(map[string]any)
	errDef["required"] = []any{"error", "fields"}
	errDef["description"] = "Every error the API answers. fields name the invalid fields of a document or a request by their path (services[0].servers[1].weight); code is the kind of failure (absent on the authentication layer's answers)."
	var codes []any
	for _, cs := range server.CodeStatuses() {
		if !slices.Contains(codes, any(string(cs.Code))) {
			codes = append(codes, string(cs.Code))
		}
	}
	errDef["properties"].(map[string]any)["code"] = map[string]any{"type": "string", "enum": codes}
	errorResponse := func(desc string) map[string]any {
		return map[string]any{"description": desc, "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": schemas + "ErrorBody"}}}}
	}

	paths := map[string]any{}
	seen := map[string]bool{}
	for _, rt := range openAPIRoutes() {
		key := rt.Method + " " + rt.Pattern
		d, ok := description[key]
		if !ok {
			t.Errorf("route %s has no entry in the OpenAPI description (openapi_test.go)", key)
			continue
		}
		seen[key] = true
		item, _ := paths[rt.Pattern].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[rt.Pattern] = item
		}
		var params []any
		for _, seg := range strings.Split(rt.Pattern, "/") {
			if strings.HasPrefix(seg, "{") {
				name := strings.Trim(seg, "{}")
				s := map[string]any{"type": "string"}
				if e := pathEnum[rt.Pattern][name]; e != nil {
					s["enum"] = e
				}
				params = append(params, map[string]any{"name": name, "in": "path", "required": true, "description": pathDesc[name], "schema": s})
			}
		}
		ps := d.params
		if d.write {
			ps = withWrite(ps...)
		}
		for _, p := range ps {
			params = append(params, map[string]any{"name": p.name, "in": p.in, "description": p.desc, "schema": p.schema})
		}
		operation := map[string]any{
			"operationId":    operationID(rt.Method, rt.Pattern),
			"summary":        d.summary,
			"tags":           []any{d.tag},
			"x-ipvsctl-role": rt.Role.String(),
		}
		if d.desc != "" {
			operation["description"] = d.desc
		}
		if len(params) > 0 {
			operation["parameters"] = params
		}
		if rt.Role == auth.Public {
			operation["security"] = []any{}
		} else {
			operation["security"] = []any{map[string]any{"bearerToken": []any{}}, map[string]any{"sessionCookie": []any{}}}
		}
		if d.req != nil {
			operation["requestBody"] = map[string]any{"required": !d.reqOptional, "content": content(d.req)}
		}
		responses := map[string]any{}
		if d.resp == nil {
			responses["204"] = map[string]any{"description": "Done"}
		} else {
			r := map[string]any{"description": "OK", "content": content(d.resp)}
			if d.etag {
				r["headers"] = map[string]any{"ETag": map[string]any{"description": `the revision ("7"): send it back in If-Match to make a write conditional on it`, "schema": map[string]any{"type": "string"}}}
			}
			responses["200"] = r
		}
		for code, a := range d.also {
			responses[code] = map[string]any{"description": a.desc, "content": content(a.body)}
		}
		if rt.Role != auth.Public {
			responses["401"] = errorResponse("No valid session or token")
			responses["403"] = errorResponse("The caller's role is below " + rt.Role.String() + ", or a cross-origin write")
		}
		responses["default"] = errorResponse("An error: 400 malformed, 404 not found, 409 conflict or stale write, 413 too large, 422 invalid (the fields name what), 429 busy, 500, 503")
		operation["responses"] = responses
		item[strings.ToLower(rt.Method)] = operation
	}
	for key := range description {
		if !seen[key] {
			t.Errorf("the OpenAPI description has %s, which is no route", key)
		}
	}
	var tagList []any
	for _, tg := range tags {
		tagList = append(tagList, map[string]any{"name": tg.name, "description": tg.desc})
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "ipvsctl API",
			"version":     "1",
			"description": "The JSON API of an ipvsctl director (`ipvsctl serve`, port 3636): the desired state, its services and real servers, drafts, history, health, status and accounts. Every change goes through the same core as the CLI and the panel. A write answers with the new revision; If-Match makes it conditional. Errors are `{\"error\": \"...\", \"fields\": [{\"path\": \"...\", \"message\": \"...\"}]}`. Each operation's `x-ipvsctl-role` is the least role that may call it (viewer < operator < admin). Guide: docs/api.md; this document: docs/api-reference.md.",
			"license":     map[string]any{"name": "See the project's LICENSE file", "url": "https://github.com/ipvsctl/ipvsctl"},
		},
		"servers": []any{map[string]any{"url": "/", "description": "the director that serves this document (its panel and API port, 3636 by default)"}},
		"tags":    tagList,
		"paths":   paths,
		"components": map[string]any{
			"schemas": g.Defs,
			"securitySchemes": map[string]any{
				"bearerToken":   map[string]any{"type": "http", "scheme": "bearer", "description": "An API token (ipvsctl token create)."},
				"sessionCookie": map[string]any{"type": "apiKey", "in": "cookie", "name": auth.CookieName, "description": "The panel's session (a login through the panel)."},
			},
		},
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// operationID is a route's name: its method and its path's words.
func operationID(method, pattern string) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(method))
	for _, seg := range strings.Split(strings.TrimPrefix(pattern, "/api/v1"), "/") {
		seg = strings.Trim(seg, "{}")
		for _, w := range strings.FieldsFunc(seg, func(r rune) bool { return r == '.' || r == '_' || r == '-' }) {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}

// The document served and docs/openapi.json are what the route table and
// the description generate: run with -update after a change to either, and
// review the diff. Every route has an operation and every operation a
// route (generateOpenAPI fails on either).
func TestOpenAPIIsGenerated(t *testing.T) {
	want := generateOpenAPI(t)
	for _, path := range openAPIOutputs {
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what the route table and the description generate: run go test ./server/httpd -run TestOpenAPIIsGenerated -update", path)
		}
	}
}

// Every route is an operation with its role, and nothing else is.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			Role string `json:"x-ipvsctl-role"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, rt := range openAPIRoutes() {
		want[rt.Method+" "+rt.Pattern] = rt.Role.String()
	}
	var got []string
	for path, ops := range doc.Paths {
		for method, o := range ops {
			key := strings.ToUpper(method) + " " + path
			got = append(got, key)
			if role, ok := want[key]; !ok {
				t.Errorf("the document has %s, which is no route", key)
			} else if o.Role != role {
				t.Errorf("%s: the document says role %q, the route %q", key, o.Role, role)
			}
		}
	}
	sort.Strings(got)
	for key := range want {
		if !slices.Contains(got, key) {
			t.Errorf("route %s is not in the document", key)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d operations for %d routes", len(got), len(want))
	}
}
