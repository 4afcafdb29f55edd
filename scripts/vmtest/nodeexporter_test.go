//go:build vmtest

package vmtest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// promResult is one series of a Prometheus instant query.
type promResult struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// promQuery asks the Prometheus in the director namespace.
func (l *lab) promQuery(q string) []promResult {
	l.t.Helper()
	out, err := exec.Command("ip", "netns", "exec", l.dir, "curl", "-sf", "--get", "--data-urlencode", "query="+q,
		"http://127.0.0.1:9090/api/v1/query").CombinedOutput()
	if err != nil {
		l.t.Fatalf("query %s: %v\n%s", q, err, out)
	}
	var r struct {
		Status string
		Data   struct{ Result []promResult }
	}
	if err := json.Unmarshal(out, &r); err != nil || r.Status != "success" {
		l.t.Fatalf("query %s: %v %s", q, err, out)
	}
	return r.Data.Result
}

// startIn runs a long-lived command in namespace ns until the test ends.
func (l *lab) startIn(ns, name string, args ...string) {
	l.t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, name}, args...)...)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		l.t.Fatalf("start %s: %v", name, err)
	}
	l.t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		cmd.Wait()
		if l.t.Failed() {
			l.t.Logf("%s log:\n%s", name, logs.String())
		}
	})
}

// backendSeries maps each series' label set (less job and instance) to its value.
func backendSeries(rs []promResult) map[string]string {
	out := map[string]string{}
	for _, r := range rs {
		var kv []string
		for k, v := range r.Metric {
			if k != "__name__" && k != "job" && k != "instance" {
				kv = append(kv, k+"="+v)
			}
		}
		sort.Strings(kv)
		out[strings.Join(kv, ",")] = fmt.Sprint(r.Value[1])
	}
	return out
}

// TestNodeExporterAgreesWithMetrics: Debian's prometheus scrapes `ipvsctl
// serve`'s metrics and Debian's prometheus-node-exporter's ipvs collector in
// the director namespace; for every backend (DR, NAT, a fwmark service, an
// IPv6 one) the two give the same label set and the same active and
// inactive connections and weight, so dashboards built on node_exporter's
// series work on ipvsctl's.
func TestNodeExporterAgreesWithMetrics(t *testing.T) {
	l := newLab(t, 2, true)
	l.apply(fmt.Sprintf(`{"services":[
	 {"name":"web","address":"%s","port":80,"interface":"eth0","scheduler":"wrr",
	  "servers":[{"address":"198.18.0.11","weight":1},{"address":"198.18.0.12","weight":3}]},
	 {"name":"web-nat","address":"%s","port":8000,"scheduler":"rr","forwarding":"nat",
	  "servers":[{"address":"198.18.1.11","port":8080,"weight":2},{"address":"198.18.1.12","port":8080}]},
	 {"name":"marked","fwmark":5,"address":"%s","interface":"eth0","scheduler":"rr","match":[{"protocol":"tcp","ports":[8080]}],
	  "servers":[{"address":"198.18.0.11","weight":4}]},
	 {"name":"web6","address":"%s","port":80,"scheduler":"rr","servers":[{"address":"2001:db8::11","weight":5}]}]}`,
		vip, vip, vipMark, vip6))
	// Inactive entries (finished connections) and active ones (held open).
	l.get(vip+":80", 8)
	l.get(vip+":8000", 4)
	for _, addr := range []string{vip + ":80", vip + ":8000", vipMark + ":8080"} {
		c, err := l.dial(addr)
		if err != nil {
			t.Fatalf("connect to %s: %v", addr, err)
		}
		defer c.Close()
	}
	l.daemon("--metrics-listen", "127.0.0.1:9366", "--interval", "1s")
	l.startIn(l.dir, "prometheus-node-exporter", "--web.listen-address=127.0.0.1:9100", "--collector.disable-defaults", "--collector.ipvs")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	// Under emulation a scrape of ipvsctl can take over a second: 2 s apart, 2 s allowed.
	if err := os.WriteFile(cfg, []byte(`global: {scrape_interval: 2s, scrape_timeout: 2s, evaluation_interval: 2s}
scrape_configs:
  - job_name: ipvsctl
    static_configs: [{targets: ["127.0.0.1:9366"]}]
  - job_name: node
    static_configs: [{targets: ["127.0.0.1:9100"]}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	l.startIn(l.dir, "prometheus", "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:9090")
	waitFor(t, "prometheus up with both targets scraped", 90*time.Second, func() bool {
		out, err := exec.Command("ip", "netns", "exec", l.dir, "curl", "-sf", "http://127.0.0.1:9090/api/v1/query?query=up").CombinedOutput()
		return err == nil && strings.Count(string(out), `"1"]`) == 2
	})
	// Connection counts move when entries expire: compare within one moment, again if they moved.
	for _, pair := range [][2]string{
		{"node_ipvs_backend_connections_active", "ipvsctl_backend_connections_active"},
		{"node_ipvs_backend_connections_inactive", "ipvsctl_backend_connections_inactive"},
		{"node_ipvs_backend_weight", "ipvsctl_backend_weight"},
	} {
		var theirs, ours map[string]string
		agree := false
		for try := 0; try < 10 && !agree; try++ {
			time.Sleep(2500 * time.Millisecond) // a new snapshot and a new scrape of each
			// The newest sample of each within 10 s: a scrape that timed out leaves no gap.
			theirs = backendSeries(l.promQuery("last_over_time(" + pair[0] + "[10s])"))
			ours = backendSeries(l.promQuery("last_over_time(" + pair[1] + "[10s])"))
			agree = len(theirs) == 6 && fmt.Sprint(theirs) == fmt.Sprint(ours)
		}
		if !agree {
			t.Errorf("%s and %s differ:\n node_exporter %v\n ipvsctl       %v", pair[0], pair[1], theirs, ours)
		} else {
			t.Logf("%s = %s for all 6 backends: %v", pair[1], pair[0], ours)
		}
	}
}
