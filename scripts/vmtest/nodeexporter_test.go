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
	// Under emulation a scrape can take seconds: 5 s apart, 5 s allowed.
	if err := os.WriteFile(cfg, []byte(`global: {scrape_interval: 5s, scrape_timeout: 5s, evaluation_interval: 5s}
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
	// Straight from both endpoints at one moment (after a new snapshot), then as Prometheus stored them.
	direct := func() (theirs, ours map[string]map[string]string) {
		theirs, ours = map[string]map[string]string{}, map[string]map[string]string{}
		for _, ep := range []struct {
			url string
			out map[string]map[string]string
		}{{"http://127.0.0.1:9100/metrics", theirs}, {"http://127.0.0.1:9366/metrics", ours}} {
			b, err := exec.Command("ip", "netns", "exec", l.dir, "curl", "-sf", ep.url).CombinedOutput()
			if err != nil {
				t.Fatalf("GET %s: %v\n%s", ep.url, err, b)
			}
			for name, m := range parseBackendSeries(string(b)) {
				ep.out[name] = m
			}
		}
		return theirs, ours
	}
	pairs := [][2]string{
		{"node_ipvs_backend_connections_active", "ipvsctl_backend_connections_active"},
		{"node_ipvs_backend_connections_inactive", "ipvsctl_backend_connections_inactive"},
		{"node_ipvs_backend_weight", "ipvsctl_backend_weight"},
	}
	agree := false
	var theirs, ours map[string]map[string]string
	for try := 0; try < 5 && !agree; try++ {
		time.Sleep(2500 * time.Millisecond)
		theirs, ours = direct()
		agree = true
		for _, p := range pairs {
			agree = agree && len(theirs[p[0]]) == 6 && fmt.Sprint(theirs[p[0]]) == fmt.Sprint(ours[p[1]])
		}
	}
	for _, p := range pairs {
		if fmt.Sprint(theirs[p[0]]) != fmt.Sprint(ours[p[1]]) || len(theirs[p[0]]) != 6 {
			t.Errorf("/metrics: %s and %s differ:\n node_exporter %v\n ipvsctl       %v", p[0], p[1], theirs[p[0]], ours[p[1]])
		} else {
			t.Logf("/metrics: %s = %s for all 6 backends: %v", p[1], p[0], ours[p[1]])
		}
	}
	// Prometheus holds the same label sets (the weights do not move).
	waitFor(t, "prometheus with both jobs' backend series", 60*time.Second, func() bool {
		return len(l.promQuery("node_ipvs_backend_weight")) == 6 && len(l.promQuery("ipvsctl_backend_weight")) == 6
	})
	if a, b := backendSeries(l.promQuery("node_ipvs_backend_weight")), backendSeries(l.promQuery("ipvsctl_backend_weight")); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("in Prometheus, node_ipvs_backend_weight and ipvsctl_backend_weight differ:\n %v\n %v", a, b)
	} else {
		t.Logf("in Prometheus, ipvsctl_backend_weight = node_ipvs_backend_weight: %v", b)
	}
	if t.Failed() {
		for _, q := range []string{"up", "scrape_duration_seconds"} {
			t.Logf("%s: %+v", q, l.promQuery(q))
		}
	}
}

// parseBackendSeries reads the *_backend_{connections_active,connections_inactive,weight}
// lines of a text exposition: name -> label set -> value.
func parseBackendSeries(text string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "#") || !strings.Contains(line, "_backend_") {
			continue
		}
		open, closing := strings.IndexByte(line, '{'), strings.LastIndexByte(line, '}')
		if open < 0 || closing < open {
			continue
		}
		name := line[:open]
		if !strings.HasSuffix(name, "_connections_active") && !strings.HasSuffix(name, "_connections_inactive") && !strings.HasSuffix(name, "_weight") {
			continue
		}
		var kv []string
		for _, pair := range strings.Split(line[open+1:closing], ",") {
			k, v, _ := strings.Cut(pair, "=")
			if v = strings.Trim(v, `"`); v != "" { // Prometheus drops empty labels: so does this
				kv = append(kv, k+"="+v)
			}
		}
		sort.Strings(kv)
		if out[name] == nil {
			out[name] = map[string]string{}
		}
		out[name][strings.Join(kv, ",")] = strings.TrimSpace(line[closing+1:])
	}
	return out
}
