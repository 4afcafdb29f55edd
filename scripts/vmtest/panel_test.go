//go:build vmtest

package vmtest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// panelClient is a browser's view of the panel from the client namespace: a
// cookie jar for the session, forms posted as a browser posts them.
type panelClient struct {
	t    *testing.T
	hc   *http.Client
	base string
}

func newPanelClient(t *testing.T, ns string) *panelClient {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := browserLike{&http.Transport{DialContext: nsDialer(ns)}}
	return &panelClient{t: t, hc: &http.Client{Transport: tr, Jar: jar, Timeout: 60 * time.Second}, base: "http://" + apiAddr}
}

// browserLike asks for HTML, as a browser does: the daemon answers an
// unauthenticated request for a page with the login page, not JSON.
type browserLike struct{ rt http.RoundTripper }

func (b browserLike) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Accept", "text/html,application/xhtml+xml")
	return b.rt.RoundTrip(r)
}

// post submits a form and follows the panel's redirect; it returns the
// final page's status and body.
func (p *panelClient) post(path string, form url.Values) (int, string) {
	p.t.Helper()
	resp, err := p.hc.PostForm(p.base+path, form)
	if err != nil {
		p.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// mustPost posts a form that must succeed (a redirect to a page answered 200).
func (p *panelClient) mustPost(path string, form url.Values) string {
	p.t.Helper()
	code, body := p.post(path, form)
	if code != http.StatusOK {
		p.t.Fatalf("POST %s: %d\n%.2000s", path, code, body)
	}
	return body
}

func (p *panelClient) get(path string) (int, string) {
	p.t.Helper()
	resp, err := p.hc.Get(p.base + path)
	if err != nil {
		p.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The panel drives the real kernel: an operator logged in through the login
// form adds a virtual service and two real servers, drains one, disables one
// from the live table's bulk action, has a bad weight refused beside its
// field, stages an edit in a draft and applies it, and rolls back from the
// history; ipvsadm -Sn reads back each step and real traffic follows it.
func TestPanelDrivesTheKernel(t *testing.T) {
	l, _, tok := servedLab(t, 2)
	api := nsClient(l.cli, "http://"+apiAddr, tok)
	revision := func() string {
		var st struct {
			Revision int64 `json:"revision"`
		}
		api.must(t, "GET", "/api/v1/status", "", &st)
		return strconv.FormatInt(st.Revision, 10)
	}
	p := newPanelClient(t, l.cli)

	// Nothing but the login page without a session.
	if code, body := p.get("/services"); code != http.StatusOK || !strings.Contains(body, `name="password"`) {
		t.Fatalf("GET /services without a session: %d, not the login page:\n%.1000s", code, body)
	}
	if code, body := p.post("/login", url.Values{"user": {"admin"}, "password": {"wrong"}}); !strings.Contains(body, `name="password"`) {
		t.Fatalf("a wrong password logged in (%d):\n%.1000s", code, body)
	}
	if body := p.mustPost("/login", url.Values{"user": {"admin"}, "password": {adminPass}}); !strings.Contains(body, "Log out") {
		t.Fatalf("after logging in, not the panel:\n%.1000s", body)
	}

	p.mustPost("/services", url.Values{"name": {"web"}, "kind": {"port"}, "protocol": {"tcp"}, "address": {vip},
		"port": {"80"}, "interface": {"eth0"}, "scheduler": {"wrr"}, "enabled": {"1"}})
	if got := l.saved(); got != "-A -t 198.18.0.100:80 -s wrr\n" {
		t.Fatalf("after the service form, ipvsadm -Sn:\n%s", got)
	}
	if addrs := l.ns(l.dir, "ip -o addr show dev eth0"); !strings.Contains(addrs, vip+"/32") {
		t.Fatalf("the service form's VIP is not on eth0:\n%s", addrs)
	}
	p.mustPost("/services/web/servers", url.Values{"name": {"rs1"}, "address": {"198.18.0.11"}, "port": {"80"},
		"weight": {"1"}, "enabled": {"1"}})
	p.mustPost("/services/web/servers", url.Values{"name": {"rs2"}, "address": {"198.18.0.12"}, "port": {"80"},
		"weight": {"3"}, "enabled": {"1"}})
	want := "-A -t 198.18.0.100:80 -s wrr\n" +
		"-a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 1\n" +
		"-a -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 3\n"
	if got := l.saved(); got != want {
		t.Fatalf("after the real-server forms, ipvsadm -Sn:\n%s\nwant:\n%s", got, want)
	}
	if c := l.get(vip+":80", 8); c["rs1"] != 2 || c["rs2"] != 6 {
		t.Fatalf("wrr 1:3 over 8 requests: %v", c)
	}
	// The live table lists both, from the daemon's kernel snapshot.
	waitFor(t, "the live table to show rs1 and rs2", 10*time.Second, func() bool {
		_, body := p.get("/live")
		return strings.Contains(body, "rs1") && strings.Contains(body, "rs2")
	})

	// A weight out of range is refused beside its field; the kernel keeps its table.
	code, body := p.post("/services/web/servers/rs1", url.Values{"name": {"rs1"}, "address": {"198.18.0.11"},
		"port": {"80"}, "weight": {"70000"}, "enabled": {"1"}})
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "70000") {
		t.Fatalf("weight 70000: %d\n%.2000s", code, body)
	}
	if got := l.saved(); got != want {
		t.Fatalf("a refused form changed the kernel:\n%s", got)
	}

	// One click: drain rs2 (weight 0, its connections go on); new connections go to rs1 only.
	p.mustPost("/services/web/servers/rs2/drain", url.Values{"base": {revision()}})
	want = "-A -t 198.18.0.100:80 -s wrr\n" +
		"-a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 1\n" +
		"-a -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 0\n"
	if got := l.saved(); got != want {
		t.Fatalf("after the drain button, ipvsadm -Sn:\n%s\nwant:\n%s", got, want)
	}
	if c := l.get(vip+":80", 4); c["rs1"] != 4 {
		t.Fatalf("new connections reach the drained server: %v", c)
	}
	drained := revision()

	// The live table's bulk action: enable rs2 and disable rs1 in one revision each.
	// rs1 is idle first: a disabled server with an established connection
	// drains at weight 0 instead of leaving (the reconciler's drain), and on
	// a loaded machine the client's last FIN can reach the director after
	// the next request.
	waitFor(t, "the requests' connections to rs1 to close", 10*time.Second, func() bool {
		return l.activeConns("198.18.0.11:80") == 0
	})
	p.mustPost("/actions", url.Values{"action": {"enable"}, "sel": {"web/rs2"}})
	p.mustPost("/actions", url.Values{"action": {"disable"}, "sel": {"web/rs1"}})
	want = "-A -t 198.18.0.100:80 -s wrr\n" +
		"-a -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 3\n"
	if got := l.saved(); got != want {
		t.Fatalf("after the bulk actions, ipvsadm -Sn:\n%s\nwant:\n%s", got, want)
	}
	// The why view names the disabled server's reason.
	if _, body := p.get("/services/web/servers/rs1/why"); !strings.Contains(body, "disabled") {
		t.Fatalf("the why view of a disabled server does not say so:\n%.2000s", body)
	}

	// A staged edit is not in the kernel until the draft is applied.
	svc := url.Values{"name": {"web"}, "kind": {"port"}, "protocol": {"tcp"}, "address": {vip}, "port": {"80"},
		"interface": {"eth0"}, "scheduler": {"rr"}, "enabled": {"1"}, "stage": {"1"}, "base": {revision()}}
	p.mustPost("/services/web", svc)
	if got := l.saved(); got != want {
		t.Fatalf("a staged edit reached the kernel:\n%s", got)
	}
	if _, body := p.get("/draft"); !strings.Contains(body, "-s rr") {
		t.Fatalf("the draft's diff does not show the scheduler change as ipvsadm would:\n%.3000s", body)
	}
	p.mustPost("/draft/apply", nil)
	if got := l.saved(); !strings.HasPrefix(got, "-A -t 198.18.0.100:80 -s rr\n") {
		t.Fatalf("after applying the draft, ipvsadm -Sn:\n%s", got)
	}

	// Roll back to the drained revision from the history: rs1 in at weight 1, rs2 drained, wrr.
	p.mustPost("/history/"+drained+"/rollback", url.Values{"base": {revision()}})
	want = "-A -t 198.18.0.100:80 -s wrr\n" +
		"-a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 1\n" +
		"-a -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 0\n"
	if got := l.saved(); got != want {
		t.Fatalf("after the rollback, ipvsadm -Sn:\n%s\nwant:\n%s", got, want)
	}

	// Every change came from the panel, under the admin's name.
	var hist []struct {
		Author string `json:"author"`
		Via    string `json:"via"`
	}
	if err := json.Unmarshal([]byte(l.remote(tok, "history", "--json", "--limit", "20")), &hist); err != nil {
		t.Fatal(err)
	}
	if len(hist) < 8 {
		t.Fatalf("history has %d revisions, want at least 8: %+v", len(hist), hist)
	}
	for _, h := range hist {
		if h.Author != "admin" || h.Via != "panel" {
			t.Errorf("a revision by %s via %s, want admin via panel", h.Author, h.Via)
		}
	}
}
