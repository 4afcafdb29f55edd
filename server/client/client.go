// Package client calls a daemon's API: it is server.Director over HTTP, so that
// the CLI's verbs give the same output and exit status whether they run in
// the CLI's process or in a daemon, local or remote.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/httpd"
)

// Client is a daemon's API.
type Client struct {
	base   string // http://host:port, no trailing slash
	token  string
	author string // sent on the local socket, whose caller the daemon trusts
	hc     *http.Client
	// maxAnswer bounds a JSON answer read (0: no bound): a peer director's
	// answers are read only so far (MaxPeerAnswer).
	maxAnswer int64
}

// MaxPeerAnswer is the most of a peer director's JSON answer that is read
// (a fingerprint set, its node view): what a director's document may be.
const MaxPeerAnswer = httpd.MaxBody

// New calls the daemon at base (http:// or https://) with a bearer token.
func New(base, token string) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &server.Error{Code: server.CodeBadInput, Msg: fmt.Sprintf("server: %q is not an http:// or https:// URL", base)}
	}
	return &Client{base: strings.TrimRight(base, "/"), token: token, hc: &http.Client{}}, nil
}

// Local calls the daemon on its local socket as author.
func Local(socket, author string) *Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}
	return &Client{base: "http://ipvsctl", author: author, hc: &http.Client{Transport: tr}}
}

// Reachable reports whether a daemon answers on the local socket.
func Reachable(socket string) bool {
	c, err := net.DialTimeout("unix", socket, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func (c *Client) do(ctx context.Context, method, path string, q url.Values, o *server.WriteOptions, body io.Reader, out any) (http.Header, error) {
	if o != nil {
		if q == nil {
			q = url.Values{}
		}
		if o.NoApply {
			q.Set("apply", "false")
		}
		if !o.NoWait {
			q.Set("wait", "true")
		}
		if o.Draft {
			q.Set("draft", "true")
		}
	}
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.author != "" {
		req.Header.Set("X-Ipvsctl-Author", c.author)
	}
	if o != nil && (o.Base != 0 || o.BaseEmpty) {
		req.Header.Set("If-Match", strconv.Quote(strconv.FormatInt(o.Base, 10)))
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("ipvsctl daemon at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return nil, decodeError(resp)
	}
	if w, ok := out.(io.Writer); ok {
		_, err = io.Copy(w, resp.Body)
		return resp.Header, err
	}
	if out != nil {
		var body io.Reader = resp.Body
		if c.maxAnswer > 0 {
			b, err := io.ReadAll(io.LimitReader(resp.Body, c.maxAnswer+1))
			if err != nil {
				return nil, fmt.Errorf("read the daemon's answer to %s %s: %w", method, path, err)
			}
			if int64(len(b)) > c.maxAnswer {
				return nil, fmt.Errorf("the answer of %s to %s %s is larger than the limit of %d bytes: not read past that", c.base, method, path, c.maxAnswer)
			}
			body = bytes.NewReader(b)
		}
		if err := json.NewDecoder(body).Decode(out); err != nil {
			return nil, fmt.Errorf("read the daemon's answer to %s %s: %w", method, path, err)
		}
	}
	return resp.Header, nil
}

// decodeError turns an error answer back into the error the core gave.
func decodeError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var e httpd.ErrorBody
	if json.Unmarshal(b, &e) != nil || e.Error == "" {
		return fmt.Errorf("daemon answered %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	if e.Code == "" {
		e.Code = codeOfStatus(resp.StatusCode)
	}
	if (e.Code == server.CodeInvalid || e.Code == server.CodeMalformed) && len(e.Fields) > 0 {
		ve := &ipvsmgr.ValidationError{}
		for _, f := range e.Fields {
			ve.Problems = append(ve.Problems, ipvsmgr.Problem{Field: f.Path, Message: f.Message})
		}
		return ve
	}
	return &server.Error{Code: e.Code, Msg: e.Error}
}

func codeOfStatus(status int) server.Code { return server.CodeOfStatus(status) }

func jsonBody(v any) io.Reader {
	b, _ := json.Marshal(v)
	return bytes.NewReader(b)
}

func esc(s string) string { return url.PathEscape(s) }

func (c *Client) write(ctx context.Context, method, path string, q url.Values, o server.WriteOptions, body io.Reader) (*server.WriteResult, error) {
	var res server.WriteResult
	if _, err := c.do(ctx, method, path, q, &o, body, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func (c *Client) State(ctx context.Context) (*ipvsmgr.State, int64, error) {
	var st ipvsmgr.State
	h, err := c.do(ctx, "GET", "/api/v1/state", nil, nil, nil, &st)
	if err != nil {
		return nil, 0, err
	}
	rev, _ := strconv.ParseInt(strings.Trim(h.Get("ETag"), `"`), 10, 64)
	return &st, rev, nil
}

func (c *Client) Apply(ctx context.Context, _ server.Actor, doc io.Reader, label string, o server.WriteOptions) (*server.WriteResult, error) {
	return c.write(ctx, "PUT", "/api/v1/state", url.Values{"label": {label}}, o, doc)
}

func (c *Client) AddService(ctx context.Context, _ server.Actor, svc ipvsmgr.Service, o server.WriteOptions) (*server.WriteResult, error) {
	return c.write(ctx, "POST", "/api/v1/services", nil, o, jsonBody(svc))
}

func (c *Client) PatchService(ctx context.Context, _ server.Actor, id string, p server.ServicePatch, o server.WriteOptions) (*server.WriteResult, error) {
	return c.write(ctx, "PATCH", "/api/v1/services/"+esc(id), nil, o, jsonBody(p))
}

func (c *Client) RemoveService(ctx context.Context, _ server.Actor, id string, o server.WriteOptions) (*server.WriteResult, error) {
	return c.write(ctx, "DELETE", "/api/v1/services/"+esc(id), nil, o, nil)
}

func (c *Client) SetServiceEnabled(ctx context.Context, _ server.Actor, id string, on bool, o server.WriteOptions) (*server.WriteResult, error) {
	return c.write(ctx, "POST", "/api/v1/services/"+esc(id)+"/"+enableVerb(on), nil, o, nil)
}

func (c *Client) AddServer(ctx context.Context, _ server.Actor, svcID string, rs ipvsmgr.Server, o server.WriteOptions) (*server.WriteResult, error) {
	return c.write(ctx, "POST", "/api/v1/services/"+esc(svcID)+"/servers", nil, o, jsonBody(rs))
}

func (c *Client) PatchServer(ctx context.Context, _ server.Actor, svcID, id string, p server.ServerPatch, o server.WriteOptions) (*server.WriteResult, error) {
	return c.write(ctx, "PATCH", "/api/v1/services/"+esc(svcID)+"/servers/"+esc(id), nil, o, jsonBody(p))
}

func (c *Client) RemoveServer(ctx context.Context, _ server.Actor, svcID, id string, o server.WriteOptions) (*server.WriteResult, error) {
	return c.write(ctx, "DELETE", "/api/v1/services/"+esc(svcID)+"/servers/"+esc(id), nil, o, nil)
}

func (c *Client) DrainServer(ctx context.Context, _ server.Actor, svcID, id string, o server.WriteOptions) (*server.WriteResult, error) {
	return c.write(ctx, "POST", "/api/v1/services/"+esc(svcID)+"/servers/"+esc(id)+"/drain", nil, o, nil)
}

func (c *Client) SetServerEnabled(ctx context.Context, _ server.Actor, svcID, id string, on bool, o server.WriteOptions) (*server.WriteResult, error) {
	return c.write(ctx, "POST", "/api/v1/services/"+esc(svcID)+"/servers/"+esc(id)+"/"+enableVerb(on), nil, o, nil)
}

func enableVerb(on bool) string {
	if on {
		return "enable"
	}
	return "disable"
}

func (c *Client) Rollback(ctx context.Context, _ server.Actor, rev int64, o server.WriteOptions) (*server.WriteResult, error) {
	return c.write(ctx, "POST", "/api/v1/rollback/"+strconv.FormatInt(rev, 10), nil, o, nil)
}

func (c *Client) Diff(ctx context.Context, doc io.Reader) (*server.DiffResult, error) {
	var d server.DiffResult
	method := "GET"
	if doc != nil {
		method = "POST"
	}
	if _, err := c.do(ctx, method, "/api/v1/diff", nil, nil, doc, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

func (c *Client) Status(ctx context.Context) (*server.StatusView, error) {
	var v server.StatusView
	if _, err := c.do(ctx, "GET", "/api/v1/status", nil, nil, nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

func (c *Client) History(ctx context.Context, limit int) ([]server.Revision, error) {
	var revs []server.Revision
	if _, err := c.do(ctx, "GET", "/api/v1/history", url.Values{"limit": {strconv.Itoa(limit)}}, nil, nil, &revs); err != nil {
		return nil, err
	}
	return revs, nil
}

func (c *Client) Revision(ctx context.Context, rev int64) (*server.RevisionDetail, error) {
	var d server.RevisionDetail
	if _, err := c.do(ctx, "GET", "/api/v1/history/"+strconv.FormatInt(rev, 10), nil, nil, nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

func (c *Client) Export(ctx context.Context, format string, w io.Writer) error {
	_, err := c.do(ctx, "GET", "/api/v1/export", url.Values{"format": {format}}, nil, nil, w)
	return err
}

// Audit lists audit records, newest first.
func (c *Client) Audit(ctx context.Context, f server.AuditFilter) ([]server.AuditEntry, error) {
	q := url.Values{}
	if f.Actor != "" {
		q.Set("actor", f.Actor)
	}
	if f.Action != "" {
		q.Set("action", f.Action)
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if !f.Since.IsZero() {
		q.Set("since", f.Since.Format(time.RFC3339))
	}
	var out []server.AuditEntry
	if _, err := c.do(ctx, "GET", "/api/v1/audit", q, nil, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Health reports the checked real servers' health.
func (c *Client) Health(ctx context.Context, q server.HealthQuery) ([]server.HealthReport, error) {
	v := url.Values{}
	if q.Service != "" {
		v.Set("service", q.Service)
	}
	if q.Server != "" {
		v.Set("server", q.Server)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out []server.HealthReport
	if _, err := c.do(ctx, "GET", "/api/v1/health", v, nil, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// CheckServer runs a real server's check once, now.
func (c *Client) CheckServer(ctx context.Context, _ server.Actor, svcID, id string) (*server.CheckResult, error) {
	var res server.CheckResult
	if _, err := c.do(ctx, "POST", "/api/v1/services/"+esc(svcID)+"/servers/"+esc(id)+"/check", nil, nil, nil, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// PrepareRealServers has the daemon push, verify or undo real servers
// with its own SSH settings (ipvsctl serve --ssh-*).
func (c *Client) PrepareRealServers(ctx context.Context, _ server.Actor, op string, sel server.RealServerSelection) (*server.RealServerReport, error) {
	var rep server.RealServerReport
	if _, err := c.do(ctx, "POST", "/api/v1/realservers/"+esc(op), nil, nil, jsonBody(sel), &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// TuneRealServers has the daemon check, push or undo the real servers'
// tuning with its own SSH settings (ipvsctl serve --ssh-*).
func (c *Client) TuneRealServers(ctx context.Context, _ server.Actor, op string, req server.RealServerTuneRequest) (*server.RealServerTuneReport, error) {
	var rep server.RealServerTuneReport
	if _, err := c.do(ctx, "POST", "/api/v1/realservers/tune/"+esc(op), nil, nil, jsonBody(req), &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// StartLoadRun marks a load run's start on the daemon.
func (c *Client) StartLoadRun(ctx context.Context, _ server.Actor, s server.LoadRunStart) (*server.LoadRun, error) {
	var run server.LoadRun
	if _, err := c.do(ctx, "POST", "/api/v1/loadtest/runs", nil, nil, jsonBody(s), &run); err != nil {
		return nil, err
	}
	return &run, nil
}

// EndLoadRun marks a load run's end with its figures.
func (c *Client) EndLoadRun(ctx context.Context, _ server.Actor, id int64, res server.LoadResult) (*server.LoadRun, error) {
	var run server.LoadRun
	if _, err := c.do(ctx, "POST", "/api/v1/loadtest/runs/"+strconv.FormatInt(id, 10)+"/end", nil, nil, jsonBody(res), &run); err != nil {
		return nil, err
	}
	return &run, nil
}

// LoadRuns lists a load test's runs ("" for the latest).
func (c *Client) LoadRuns(ctx context.Context, test string) ([]server.LoadRun, error) {
	var q url.Values
	if test != "" {
		q = url.Values{"test": {test}}
	}
	var rs []server.LoadRun
	if _, err := c.do(ctx, "GET", "/api/v1/loadtest/runs", q, nil, nil, &rs); err != nil {
		return nil, err
	}
	return rs, nil
}

var _ server.Director = (*Client)(nil)

func (c *Client) SetSettings(ctx context.Context, _ server.Actor, p server.SettingsPatch, o server.WriteOptions) (*server.WriteResult, error) {
	return c.write(ctx, "PATCH", "/api/v1/settings", nil, o, jsonBody(p))
}

func (c *Client) Why(ctx context.Context, svcID, id string) (*server.Why, error) {
	var w server.Why
	if _, err := c.do(ctx, "GET", "/api/v1/services/"+esc(svcID)+"/servers/"+esc(id)+"/why", nil, nil, nil, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

func (c *Client) Drafts(ctx context.Context) ([]server.DraftInfo, error) {
	var ds []server.DraftInfo
	if _, err := c.do(ctx, "GET", "/api/v1/drafts", nil, nil, nil, &ds); err != nil {
		return nil, err
	}
	return ds, nil
}

func (c *Client) DraftDocument(ctx context.Context, author string) ([]byte, error) {
	var b bytes.Buffer
	if _, err := c.do(ctx, "GET", draftPath(author), nil, nil, nil, &b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func (c *Client) DiffDraft(ctx context.Context, author string) (*server.DraftDiff, error) {
	var d server.DraftDiff
	if _, err := c.do(ctx, "GET", draftPath(author)+"/diff", nil, nil, nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

func (c *Client) StartDraft(ctx context.Context, _ server.Actor) (*server.DraftInfo, error) {
	var d server.DraftInfo
	if _, err := c.do(ctx, "POST", "/api/v1/draft/start", nil, nil, nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

func (c *Client) ApplyDraft(ctx context.Context, _ server.Actor, label string, o server.WriteOptions) (*server.WriteResult, error) {
	var q url.Values
	if label != "" {
		q = url.Values{"label": {label}}
	}
	return c.write(ctx, "POST", "/api/v1/draft/apply", q, o, nil)
}

func (c *Client) DiscardDraft(ctx context.Context, _ server.Actor) error {
	_, err := c.do(ctx, "DELETE", "/api/v1/draft", nil, nil, nil, nil)
	return err
}

// draftPath is author's draft; "" is the caller's own (the token's user).
func draftPath(author string) string {
	if author == "" {
		return "/api/v1/draft"
	}
	return "/api/v1/drafts/" + esc(author)
}
