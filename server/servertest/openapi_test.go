package servertest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The validating middleware bites: an answer the document does not
// describe, a request it refuses that the API takes, are reported; what the
// document says passes.
func TestValidatingReportsDrift(t *testing.T) {
	answer := map[string]string{
		"/api/v1/services":                    `[{"name":"web","address":"198.18.0.1","port":80,"servers":[]}]`,
		"/api/v1/history":                     `[{"revision":"seven"}]`, // a revision is a number
		"/api/v1/settings":                    `{"network":"dr","tcp_timeout":0,"tcpfin_timeout":0,"udp_timeout":0,"colour":"red"}`,
		"/api/v1/services/web/servers/r1/why": `{}`,
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/api/v1/services/web" && r.Method == "PATCH" {
			fmt.Fprint(w, `{"revision":2}`)
			return
		}
		fmt.Fprint(w, answer[r.URL.Path])
	})
	var reports []string
	c := &Contract{}
	ts := httptest.NewServer(validating(t, h, c, func(format string, args ...any) { reports = append(reports, fmt.Sprintf(format, args...)) }))
	defer ts.Close()
	call := func(method, path, body string) []string {
		reports = nil
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer x")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return reports
	}
	if r := call("GET", "/api/v1/services", ""); len(r) != 0 {
		t.Errorf("a described answer reported: %v", r)
	}
	for _, path := range []string{"/api/v1/history", "/api/v1/settings"} {
		if r := call("GET", path, ""); len(r) != 1 || !strings.Contains(r[0], "not what the document says") {
			t.Errorf("GET %s: an answer the document does not describe: reports %v", path, r)
		}
	}
	if r := call("PATCH", "/api/v1/services/web", `{"weight":3}`); len(r) != 1 || !strings.Contains(r[0], "the document refuses") {
		t.Errorf("a request the document refuses (no weight on a service), answered 200: reports %v", r)
	}
	if r := call("GET", "/api/v1/services", ""); len(r) != 0 || c.Checked.Load() != 5 || c.Refused.Load() != 1 {
		t.Errorf("reports %v, %d checked, %d refused", r, c.Checked.Load(), c.Refused.Load())
	}
}
