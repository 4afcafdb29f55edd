// Package httpd is the daemon's HTTP side: the JSON API under /api/v1 (and
// the same API on the local socket for the CLI), the panel's routes, the
// metrics, with one route table that says each route's role.
package httpd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
)

// api holds the JSON handlers; each calls the core and nothing else.
type api struct {
	core     *server.Core
	polls    pollLimit               // long polls per user (longpoll.go)
	streams  pollLimit               // event streams per user (api_events.go)
	rendered server.Rendered[[]byte] // the status document, one encoding per change of what the daemon knows
}

// apiRoutes is the API's route table: every route with the least role that may call it.
func (a *api) routes() []auth.Route {
	h := func(f func(w http.ResponseWriter, r *http.Request) error) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := f(w, r); err != nil {
				a.fail(w, r, err)
			}
		})
	}
	const p = "/api/v1"
	return []auth.Route{
		{Method: "GET", Pattern: p + "/state", Role: auth.Viewer, Handler: h(a.getState)},
		{Method: "PUT", Pattern: p + "/state", Role: server.RoleFor("apply"), Handler: h(a.putState)},
		{Method: "GET", Pattern: p + "/diff", Role: auth.Viewer, Handler: h(a.diff)},
		{Method: "POST", Pattern: p + "/diff", Role: auth.Viewer, Handler: h(a.diff)},
		{Method: "GET", Pattern: p + "/services", Role: auth.Viewer, Handler: h(a.listServices)},
		{Method: "POST", Pattern: p + "/services", Role: server.RoleFor("vs add"), Handler: h(a.addService)},
		{Method: "GET", Pattern: p + "/services/{id}", Role: auth.Viewer, Handler: h(a.getService)},
		{Method: "PATCH", Pattern: p + "/services/{id}", Role: server.RoleFor("vs set"), Handler: h(a.patchService)},
		{Method: "DELETE", Pattern: p + "/services/{id}", Role: server.RoleFor("vs rm"), Handler: h(a.removeService)},
		{Method: "POST", Pattern: p + "/services/{id}/enable", Role: server.RoleFor("vs enable"), Handler: h(a.enableService(true))},
		{Method: "POST", Pattern: p + "/services/{id}/disable", Role: server.RoleFor("vs disable"), Handler: h(a.enableService(false))},
		{Method: "GET", Pattern: p + "/services/{id}/servers", Role: auth.Viewer, Handler: h(a.listServers)},
		{Method: "POST", Pattern: p + "/services/{id}/servers", Role: server.RoleFor("rs add"), Handler: h(a.addServer)},
		{Method: "GET", Pattern: p + "/services/{id}/servers/{sid}", Role: auth.Viewer, Handler: h(a.getServer)},
		// An operator may change server.OperatorServerFields; other fields need an admin (the core checks).
		{Method: "PATCH", Pattern: p + "/services/{id}/servers/{sid}", Role: server.RoleFor("rs set"), Handler: h(a.patchServer)},
		{Method: "DELETE", Pattern: p + "/services/{id}/servers/{sid}", Role: server.RoleFor("rs rm"), Handler: h(a.removeServer)},
		{Method: "POST", Pattern: p + "/services/{id}/servers/{sid}/drain", Role: server.RoleFor("rs drain"), Handler: h(a.drainServer)},
		{Method: "POST", Pattern: p + "/services/{id}/servers/{sid}/enable", Role: server.RoleFor("rs enable"), Handler: h(a.enableServer(true))},
		{Method: "POST", Pattern: p + "/services/{id}/servers/{sid}/disable", Role: server.RoleFor("rs disable"), Handler: h(a.enableServer(false))},
		{Method: "POST", Pattern: p + "/services/{id}/servers/{sid}/check", Role: server.RoleFor("rs check"), Handler: h(a.checkServer)},
		{Method: "GET", Pattern: p + "/services/{id}/servers/{sid}/why", Role: server.RoleFor("why"), Handler: h(a.why)},
		{Method: "GET", Pattern: p + "/settings", Role: auth.Viewer, Handler: h(a.getSettings)},
		{Method: "GET", Pattern: p + "/drafts", Role: server.RoleFor("draft show"), Handler: h(a.listDrafts)},
		{Method: "GET", Pattern: p + "/drafts/{author}", Role: server.RoleFor("draft show"), Handler: h(a.getDraft)},
		{Method: "GET", Pattern: p + "/drafts/{author}/diff", Role: server.RoleFor("draft show"), Handler: h(a.diffDraft)},
		{Method: "GET", Pattern: p + "/draft", Role: server.RoleFor("draft show"), Handler: h(a.getDraft)},
		{Method: "GET", Pattern: p + "/draft/diff", Role: server.RoleFor("draft show"), Handler: h(a.diffDraft)},
		{Method: "POST", Pattern: p + "/draft/start", Role: server.RoleFor("draft stage"), Handler: h(a.startDraft)},
		{Method: "POST", Pattern: p + "/draft/apply", Role: server.RoleFor("draft apply"), Handler: h(a.applyDraft)},
		{Method: "DELETE", Pattern: p + "/draft", Role: server.RoleFor("draft discard"), Handler: h(a.discardDraft)},
		{Method: "PATCH", Pattern: p + "/settings", Role: server.RoleFor("settings"), Handler: h(a.patchSettings)},
		{Method: "GET", Pattern: p + "/status", Role: auth.Viewer, Handler: h(a.status)},
		{Method: "GET", Pattern: p + "/health", Role: auth.Viewer, Handler: h(a.health)},
		{Method: "GET", Pattern: p + "/history", Role: auth.Viewer, Handler: h(a.history)},
		{Method: "GET", Pattern: p + "/events", Role: server.RoleFor("events"), Handler: h(a.events)},
		{Method: "GET", Pattern: p + "/history/{rev}", Role: auth.Viewer, Handler: h(a.revision)},
		{Method: "POST", Pattern: p + "/rollback/{rev}", Role: server.RoleFor("rollback"), Handler: h(a.rollback)},
		{Method: "GET", Pattern: p + "/export", Role: auth.Viewer, Handler: h(a.export)},
		{Method: "POST", Pattern: p + "/import", Role: server.RoleFor("import"), Handler: h(a.importState)},
		{Method: "GET", Pattern: p + "/audit", Role: server.RoleFor("audit"), Handler: h(a.audit)},
		{Method: "GET", Pattern: p + "/node", Role: auth.Viewer, Handler: h(a.getNode)},
		{Method: "PATCH", Pattern: p + "/node", Role: server.RoleFor("node set"), Handler: h(a.patchNode)},
		{Method: "GET", Pattern: p + "/bgp", Role: auth.Viewer, Handler: h(a.getBGP)},
		// A call between directors (peers.go): a believed client certificate first, then the token.
		{Method: "POST", Pattern: pathFingerprints, Role: auth.Viewer, Handler: h(a.reportFingerprints)},
		{Method: "POST", Pattern: p + "/realservers/{op}", Role: server.RoleFor("realserver"), Handler: h(a.prepareRealServers)},
		{Method: "POST", Pattern: p + "/realservers/tune/{op}", Role: server.RoleFor("realserver tune"), Handler: h(a.tuneRealServers)},
		{Method: "GET", Pattern: p + "/loadtest/runs", Role: auth.Viewer, Handler: h(a.listLoadRuns)},
		{Method: "POST", Pattern: p + "/loadtest/runs", Role: server.RoleFor("loadtest start"), Handler: h(a.startLoadRun)},
		{Method: "POST", Pattern: p + "/loadtest/runs/{id}/end", Role: server.RoleFor("loadtest end"), Handler: h(a.endLoadRun)},
	}
}

func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, body := errorBody(err)
	if rl := (*server.RateLimitedError)(nil); errors.As(err, &rl) {
		w.Header().Set("Retry-After", strconv.Itoa(rl.Seconds()))
	}
	if body.Code == server.CodeStale {
		if base, ok := baseRevision(r); ok {
			body.ChangesSince, _ = a.core.ChangesSince(r.Context(), base)
		}
	}
	writeJSON(w, status, body)
}

// actor is who makes the request, as the auth middleware found.
func actor(r *http.Request) server.Actor {
	p, _ := auth.FromContext(r.Context())
	if p == nil {
		return server.Actor{Name: "unknown", Via: "api", Role: auth.Public}
	}
	return server.Actor{Name: p.User, Via: p.Via, Addr: p.ClientAddr, Role: p.Role}
}

// baseRevision is the revision an If-Match header names ("7" or "7"; "0"
// is the ETag of an empty store).
func baseRevision(r *http.Request) (int64, bool) {
	v := strings.Trim(strings.TrimPrefix(r.Header.Get("If-Match"), "W/"), `"`)
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil && n >= 0
}

// writeOptions reads ?apply=false, ?wait=true, ?draft=true and If-Match.
func writeOptions(w http.ResponseWriter, r *http.Request) (server.WriteOptions, error) {
	var o server.WriteOptions
	q := r.URL.Query()
	if v := q.Get("apply"); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return o, &server.Error{Code: server.CodeBadInput, Msg: "apply: " + strconv.Quote(v) + " is not true or false"}
		}
		o.NoApply = !on
	}
	if v := q.Get("draft"); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return o, &server.Error{Code: server.CodeBadInput, Msg: "draft: " + strconv.Quote(v) + " is not true or false"}
		}
		o.Draft = on
	}
	o.NoWait = true
	if v := q.Get("wait"); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return o, &server.Error{Code: server.CodeBadInput, Msg: "wait: " + strconv.Quote(v) + " is not true or false"}
		}
		o.NoWait = !on
	}
	if !o.NoWait {
		// Waiting for drains may take up to settings.retire_timeout.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(15 * time.Minute))
	}
	if h := r.Header.Get("If-Match"); h != "" && h != "*" {
		base, ok := baseRevision(r)
		if !ok {
			return o, &server.Error{Code: server.CodeBadInput, Msg: "If-Match: " + strconv.Quote(h) + ` is not a revision ("7")`}
		}
		o.Base, o.BaseEmpty = base, base == 0
	}
	return o, nil
}

// decode reads a JSON body into v; unknown fields are an error.
func decode(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	return decodeBytes(body, v)
}

func decodeBytes(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &ipvsmgr.ValidationError{Problems: []ipvsmgr.Problem{{Field: "document", Message: err.Error()}}}
	}
	if dec.More() {
		return &ipvsmgr.ValidationError{Problems: []ipvsmgr.Problem{{Field: "document", Message: "trailing data after the JSON object"}}}
	}
	return nil
}

func (a *api) written(w http.ResponseWriter, res *server.WriteResult, err error) error {
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *api) getState(w http.ResponseWriter, r *http.Request) error {
	if r.URL.Query().Has("after") {
		return a.waitState(w, r)
	}
	st, rev, err := a.core.State(r.Context())
	if err != nil {
		return err
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(rev, 10)))
	writeJSON(w, http.StatusOK, st)
	return nil
}

func (a *api) putState(w http.ResponseWriter, r *http.Request) error {
	o, err := writeOptions(w, r)
	if err != nil {
		return err
	}
	res, err := a.core.Apply(r.Context(), actor(r), r.Body, orDefault(r.URL.Query().Get("label"), "PUT /api/v1/state"), o)
	if err == nil {
		w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(res.Revision, 10)))
	}
	return a.written(w, res, err)
}

func (a *api) diff(w http.ResponseWriter, r *http.Request) error {
	var doc io.Reader
	if r.Method == http.MethodPost {
		doc = r.Body
	}
	d, err := a.core.Diff(r.Context(), doc)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

func (a *api) listServices(w http.ResponseWriter, r *http.Request) error {
	st, rev, err := a.core.State(r.Context())
	if err != nil {
		return err
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(rev, 10)))
	writeJSON(w, http.StatusOK, st.Services)
	return nil
}

func (a *api) service(r *http.Request) (*ipvsmgr.Service, int64, error) {
	st, rev, err := a.core.State(r.Context())
	if err != nil {
		return nil, 0, err
	}
	i, err := server.FindService(st, r.PathValue("id"))
	if err != nil {
		return nil, 0, err
	}
	return &st.Services[i], rev, nil
}

func (a *api) getService(w http.ResponseWriter, r *http.Request) error {
	s, rev, err := a.service(r)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(rev, 10)))
	writeJSON(w, http.StatusOK, s)
	return nil
}

func (a *api) addService(w http.ResponseWriter, r *http.Request) error {
	o, err := writeOptions(w, r)
	if err != nil {
		return err
	}
	var s ipvsmgr.Service
	if err := decode(r, &s); err != nil {
		return err
	}
	res, err := a.core.AddService(r.Context(), actor(r), s, o)
	return a.written(w, res, err)
}

func (a *api) patchService(w http.ResponseWriter, r *http.Request) error {
	o, err := writeOptions(w, r)
	if err != nil {
		return err
	}
	var p server.ServicePatch
	if err := decode(r, &p); err != nil {
		return err
	}
	res, err := a.core.PatchService(r.Context(), actor(r), r.PathValue("id"), p, o)
	return a.written(w, res, err)
}

func (a *api) removeService(w http.ResponseWriter, r *http.Request) error {
	o, err := writeOptions(w, r)
	if err != nil {
		return err
	}
	res, err := a.core.RemoveService(r.Context(), actor(r), r.PathValue("id"), o)
	return a.written(w, res, err)
}

func (a *api) enableService(on bool) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		o, err := writeOptions(w, r)
		if err != nil {
			return err
		}
		res, err := a.core.SetServiceEnabled(r.Context(), actor(r), r.PathValue("id"), on, o)
		return a.written(w, res, err)
	}
}

func (a *api) listServers(w http.ResponseWriter, r *http.Request) error {
	s, rev, err := a.service(r)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(rev, 10)))
	writeJSON(w, http.StatusOK, s.Servers)
	return nil
}

func (a *api) getServer(w http.ResponseWriter, r *http.Request) error {
	s, rev, err := a.service(r)
	if err != nil {
		return err
	}
	i, err := server.FindServer(s, r.PathValue("sid"))
	if err != nil {
		return err
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(rev, 10)))
	writeJSON(w, http.StatusOK, s.Servers[i])
	return nil
}

func (a *api) addServer(w http.ResponseWriter, r *http.Request) error {
	o, err := writeOptions(w, r)
	if err != nil {
		return err
	}
	var rs ipvsmgr.Server
	if err := decode(r, &rs); err != nil {
		return err
	}
	res, err := a.core.AddServer(r.Context(), actor(r), r.PathValue("id"), rs, o)
	return a.written(w, res, err)
}

func (a *api) patchServer(w http.ResponseWriter, r *http.Request) error {
	o, err := writeOptions(w, r)
	if err != nil {
		return err
	}
	var p server.ServerPatch
	if err := decode(r, &p); err != nil {
		return err
	}
	res, err := a.core.PatchServer(r.Context(), actor(r), r.PathValue("id"), r.PathValue("sid"), p, o)
	return a.written(w, res, err)
}

func (a *api) removeServer(w http.ResponseWriter, r *http.Request) error {
	o, err := writeOptions(w, r)
	if err != nil {
		return err
	}
	res, err := a.core.RemoveServer(r.Context(), actor(r), r.PathValue("id"), r.PathValue("sid"), o)
	return a.written(w, res, err)
}

func (a *api) drainServer(w http.ResponseWriter, r *http.Request) error {
	o, err := writeOptions(w, r)
	if err != nil {
		return err
	}
	res, err := a.core.DrainServer(r.Context(), actor(r), r.PathValue("id"), r.PathValue("sid"), o)
	return a.written(w, res, err)
}

func (a *api) enableServer(on bool) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		o, err := writeOptions(w, r)
		if err != nil {
			return err
		}
		res, err := a.core.SetServerEnabled(r.Context(), actor(r), r.PathValue("id"), r.PathValue("sid"), on, o)
		return a.written(w, res, err)
	}
}

func (a *api) why(w http.ResponseWriter, r *http.Request) error {
	why, err := a.core.Why(r.Context(), r.PathValue("id"), r.PathValue("sid"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, why)
	return nil
}

func (a *api) getSettings(w http.ResponseWriter, r *http.Request) error {
	st, rev, err := a.core.State(r.Context())
	if err != nil {
		return err
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(rev, 10)))
	writeJSON(w, http.StatusOK, st.Settings)
	return nil
}

func (a *api) patchSettings(w http.ResponseWriter, r *http.Request) error {
	o, err := writeOptions(w, r)
	if err != nil {
		return err
	}
	var p server.SettingsPatch
	if err := decode(r, &p); err != nil {
		return err
	}
	res, err := a.core.SetSettings(r.Context(), actor(r), p, o)
	return a.written(w, res, err)
}

func (a *api) listDrafts(w http.ResponseWriter, r *http.Request) error {
	ds, err := a.core.Drafts(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ds)
	return nil
}

func (a *api) getDraft(w http.ResponseWriter, r *http.Request) error {
	doc, err := a.core.DraftDocument(r.Context(), draftAuthor(r))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	_, err = w.Write(doc)
	return err
}

func (a *api) diffDraft(w http.ResponseWriter, r *http.Request) error {
	d, err := a.core.DiffDraft(r.Context(), draftAuthor(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// draftAuthor is whose draft a route names: {author}, else the caller's own.
func draftAuthor(r *http.Request) string {
	return orDefault(r.PathValue("author"), actor(r).Name)
}

// startDraft starts the caller's own draft from the current state (kept
// when they have one); the edit routes with ?draft=true stage in it.
func (a *api) startDraft(w http.ResponseWriter, r *http.Request) error {
	d, err := a.core.StartDraft(r.Context(), actor(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// applyDraft applies the caller's own draft.
func (a *api) applyDraft(w http.ResponseWriter, r *http.Request) error {
	o, err := writeOptions(w, r)
	if err != nil {
		return err
	}
	res, err := a.core.ApplyDraft(r.Context(), actor(r), r.URL.Query().Get("label"), o)
	return a.written(w, res, err)
}

// discardDraft throws the caller's own draft away.
func (a *api) discardDraft(w http.ResponseWriter, r *http.Request) error {
	if err := a.core.DiscardDraft(r.Context(), actor(r)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *api) status(w http.ResponseWriter, r *http.Request) error {
	body, err := a.rendered.Get(a.core.KeyNow(), func() ([]byte, error) {
		v, err := a.core.Status(r.Context())
		if err != nil {
			return nil, err
		}
		return json.Marshal(v)
	})
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, err = w.Write(body)
	return err
}

func (a *api) health(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := intParam("limit", q.Get("limit"), 20)
	if err != nil {
		return err
	}
	reports, err := a.core.Health(r.Context(), server.HealthQuery{Service: q.Get("service"), Server: q.Get("server"), Limit: limit})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, reports)
	return nil
}

func (a *api) checkServer(w http.ResponseWriter, r *http.Request) error {
	res, err := a.core.CheckServer(r.Context(), actor(r), r.PathValue("id"), r.PathValue("sid"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func intParam(name, v string, def int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, &server.Error{Code: server.CodeBadInput, Msg: name + ": " + strconv.Quote(v) + " is not a positive number"}
	}
	return n, nil
}

func (a *api) history(w http.ResponseWriter, r *http.Request) error {
	limit, err := intParam("limit", r.URL.Query().Get("limit"), 20)
	if err != nil {
		return err
	}
	revs, err := a.core.History(r.Context(), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, revs)
	return nil
}

func revParam(r *http.Request) (int64, error) {
	v := r.PathValue("rev")
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, &server.Error{Code: server.CodeBadInput, Msg: "revision " + strconv.Quote(v) + " is not a revision number"}
	}
	return n, nil
}

func (a *api) revision(w http.ResponseWriter, r *http.Request) error {
	rev, err := revParam(r)
	if err != nil {
		return err
	}
	d, err := a.core.Revision(r.Context(), rev)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

func (a *api) rollback(w http.ResponseWriter, r *http.Request) error {
	rev, err := revParam(r)
	if err != nil {
		return err
	}
	o, err := writeOptions(w, r)
	if err != nil {
		return err
	}
	res, err := a.core.Rollback(r.Context(), actor(r), rev, o)
	return a.written(w, res, err)
}

func (a *api) export(w http.ResponseWriter, r *http.Request) error {
	format := orDefault(r.URL.Query().Get("format"), "json")
	var b bytes.Buffer
	if err := a.core.Export(r.Context(), format, &b); err != nil {
		return err
	}
	if format == "json" {
		w.Header().Set("Content-Type", "application/json")
	} else {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	_, err := w.Write(b.Bytes())
	return err
}

func (a *api) importState(w http.ResponseWriter, r *http.Request) error {
	o, err := writeOptions(w, r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var imp server.ImportOptions
	for name, dst := range map[string]*bool{"ignore_unknown": &imp.IgnoreUnknown, "allow_empty": &imp.AllowEmpty} {
		if v := q.Get(name); v != "" {
			on, err := strconv.ParseBool(v)
			if err != nil {
				return &server.Error{Code: server.CodeBadInput, Msg: name + ": " + strconv.Quote(v) + " is not true or false"}
			}
			*dst = on
		}
	}
	imp.ConfigID = q.Get("config_id")
	res, err := a.core.ImportWith(r.Context(), actor(r), q.Get("format"), orDefault(q.Get("name"), "upload"), r.Body, imp, o)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *api) audit(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := intParam("limit", q.Get("limit"), 100)
	if err != nil {
		return err
	}
	f := server.AuditFilter{Actor: q.Get("actor"), Action: q.Get("action"), Limit: limit}
	if v := q.Get("since"); v != "" {
		if f.Since, err = time.Parse(time.RFC3339, v); err != nil {
			return &server.Error{Code: server.CodeBadInput, Msg: "since: " + strconv.Quote(v) + " is not an RFC 3339 time"}
		}
	}
	entries, err := a.core.Audit(r.Context(), f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, entries)
	return nil
}

// prepareRealServers pushes, verifies or undoes real servers over SSH: the
// body names targets, or RIPs of the desired state; no body means all of it.
func (a *api) prepareRealServers(w http.ResponseWriter, r *http.Request) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	var sel server.RealServerSelection
	if len(bytes.TrimSpace(body)) > 0 {
		if err := decodeBytes(body, &sel); err != nil {
			return err
		}
	}
	// Each real server may take its SSH timeout; the run finishes (and is
	// stored) even if the caller goes away.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(15 * time.Minute))
	rep, err := a.core.PrepareRealServers(context.WithoutCancel(r.Context()), actor(r), r.PathValue("op"), sel)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rep)
	return nil
}

// tuneRealServers checks, pushes or undoes the real servers' tuning over
// SSH: the body names targets or RIPs of the desired state, and ports; no
// body means all of the desired state's real servers.
func (a *api) tuneRealServers(w http.ResponseWriter, r *http.Request) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	var req server.RealServerTuneRequest
	if len(bytes.TrimSpace(body)) > 0 {
		if err := decodeBytes(body, &req); err != nil {
			return err
		}
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(15 * time.Minute))
	rep, err := a.core.TuneRealServers(context.WithoutCancel(r.Context()), actor(r), r.PathValue("op"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rep)
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
