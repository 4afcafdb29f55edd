package metrics

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/health"
	"github.com/ipvsctl/ipvsctl/server"
)

// TestExpositionText: the text format as client_golang's encoder wrote
// it: label names in order whatever order they are declared in, `le`
// last, escaped values, cumulative buckets, a family without samples left
// out, a series without labels there at 0 from the start.
func TestExpositionText(t *testing.T) {
	e := newExpo(nil)
	c := newVec("counter", "x_total", "Things, with a \\ and a\nline.", "zeta", "alpha")
	c.add(2, `a"b`, "c\\d\ne")
	c.add(1, "z", "a")
	c.write(e)
	newVec("counter", "x_plain_total", "Always there.").write(e)
	h := newHistogram("x_seconds", "Durations.", []float64{0.1, 1}, "route")
	for _, v := range []float64{0.05, 0.1, 0.5, 3} {
		h.observe(v, "/a")
	}
	h.write(e)
	e.family("x_empty", "gauge", "No samples.", "a")
	want := `# HELP x_plain_total Always there.
# TYPE x_plain_total counter
x_plain_total 0
# HELP x_seconds Durations.
# TYPE x_seconds histogram
x_seconds_bucket{route="/a",le="0.1"} 2
x_seconds_bucket{route="/a",le="1"} 3
x_seconds_bucket{route="/a",le="+Inf"} 4
x_seconds_sum{route="/a"} 3.65
x_seconds_count{route="/a"} 4
# HELP x_total Things, with a \\ and a\nline.
# TYPE x_total counter
x_total{alpha="a",zeta="z"} 1
x_total{alpha="c\\d\ne",zeta="a\"b"} 2
`
	if got := string(e.bytes()); got != want {
		t.Errorf("exposition:\n%s\nwant:\n%s", got, want)
	}
}

// TestExpositionPassesPromtool: the daemon's whole exposition, with each
// kind of family in it, is one Prometheus' own promtool accepts, and
// carries the Go and process families dashboards for any Go exporter use.
func TestExpositionPassesPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		testenv.Needf(t, "needs promtool (Debian's prometheus): %v", err)
	}
	ctx := context.Background()
	core, _ := testCore(t, ctx)
	doc := `{"services":[{"name":"web","address":"198.18.0.100","port":80,"servers":[{"address":"198.18.0.11"},{"address":"198.18.0.12"}]},
		{"name":"mark","fwmark":5,"servers":[{"address":"198.18.0.13"}]}]}`
	if _, err := core.Apply(ctx, server.Actor{Name: "t", Via: "test"}, strings.NewReader(doc), "test", server.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	m := New(core)
	m.Reconciled(server.ReconcileReport{At: time.Now(), Duration: 3 * time.Millisecond})
	m.Checked(&ipvsmgr.CheckSpec{Type: "tcp"}, health.Result{Outcome: health.Pass, Duration: 2 * time.Millisecond})
	m.ProgramRan("notify_up", "ok")
	m.Alert("smtp", "sent")
	m.Instrument("/api/v1/status", http.NotFoundHandler()).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/api/v1/status", nil))

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	if ct := rec.Header().Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s\n%s", err, out, body)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^ipvsctl_service_connections_total\{local_address="198.18.0.100",local_mark="",local_port="80",proto="TCP"\} 0$`),
		regexp.MustCompile(`(?m)^ipvsctl_service_connections_total\{local_address="",local_mark="00000005",local_port="0",proto="FWM"\} 0$`),
		regexp.MustCompile(`(?m)^ipvsctl_health_check_duration_seconds_bucket\{outcome="pass",type="tcp",le="0.0045000000000000005"\} 1$`),
		regexp.MustCompile(`(?m)^ipvsctl_http_requests_total\{code="404",route="/api/v1/status"\} 1$`),
		regexp.MustCompile(`(?m)^ipvsctl_reconcile_duration_seconds_count 1$`),
		regexp.MustCompile(`(?m)^ipvsctl_alerts_sent_total\{kind="smtp"\} 1$`),
		regexp.MustCompile(`(?m)^go_goroutines [1-9][0-9]*$`),
		regexp.MustCompile(`(?m)^go_info\{version="go[0-9.]+.*"\} 1$`),
		regexp.MustCompile(`(?m)^go_gc_duration_seconds\{quantile="0.5"\} `),
		regexp.MustCompile(`(?m)^go_memstats_heap_alloc_bytes [1-9]`),
		regexp.MustCompile(`(?m)^process_open_fds [1-9]`),
	} {
		if !want.MatchString(body) {
			t.Errorf("no line matching %s\n%s", want, body)
		}
	}
	// The process's resident memory and start time are its own (/proc).
	rss := regexp.MustCompile(`(?m)^process_resident_memory_bytes (\S+)$`).FindStringSubmatch(body)
	start := regexp.MustCompile(`(?m)^process_start_time_seconds (\S+)$`).FindStringSubmatch(body)
	if rss == nil || start == nil {
		t.Fatalf("no process_resident_memory_bytes or process_start_time_seconds:\n%s", body)
	}
	if v, _ := strconv.ParseFloat(rss[1], 64); v < 1<<20 {
		t.Errorf("process_resident_memory_bytes %s", rss[1])
	}
	// /proc/stat's boot time is in whole seconds, the process's start in hundredths.
	if v, _ := strconv.ParseFloat(start[1], 64); v > float64(packageInit.Unix())+1.01 || v < float64(packageInit.Unix())-60 {
		t.Errorf("process_start_time_seconds %s, this package's init ran at %s", start[1], packageInit)
	}
}

// packageInit is when this package's init ran: after the process started.
var packageInit = time.Now()

// A result's observation allocates nothing once its cell exists: the
// daemon makes one per check, 10,000 a second at 10,000 targets.
func TestObserveDoesNotAllocate(t *testing.T) {
	h := newHistogram("x_seconds", "Durations.", []float64{0.1, 1}, "type", "outcome")
	h.observe(0.01, "tcp", "pass")
	if n := testing.AllocsPerRun(100, func() { h.observe(0.02, "tcp", "pass") }); n != 0 {
		t.Errorf("observe allocates %.1f times a call", n)
	}
}
