//go:build labtest

package lab

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
	"github.com/ipvsctl/ipvsctl/server/panel/browsertest"
)

// loadLine is one LOADTEST row scripts/loadtest.sh --lab prints.
type loadLine struct {
	setting, via  string
	rps           float64
	p50, p99      string
	entries, bkts int
}

// TestLabLoadTest runs scripts/loadtest.sh --lab --keep (the lab, as root,
// on 127.0.0.1:PORT) with SECONDS a run (IPVSCTL_LAB_LOADTEST_SECONDS,
// default 20): six wrk runs through the DR and NAT VIPs on the defaults,
// tuned (tune apply, the ip_vs reload, serve restoring) and on the defaults
// again (tune undo, the reload). It checks the printed table (every run
// served, the table resized by the apply and back after the undo), the SVG
// chart, the same runs with the same figures marked through the daemon's API
// and audited, and the panel's Tuning page drawing them with the sampler's
// charts (saved as lab-loadtest.png); then stops the lab. IPVSCTL_LOADTEST_SVG
// names where the chart is kept.
func TestLabLoadTest(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Need(t, "the lab runs as root")
	}
	port := os.Getenv("IPVSCTL_LAB_PORT")
	if port == "" {
		port = "3636"
	}
	secs := 20
	if v, err := strconv.Atoi(os.Getenv("IPVSCTL_LAB_LOADTEST_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	labDir := os.Getenv("IPVSCTL_LAB_DIR")
	if labDir == "" {
		labDir = "/run/ipvsctl-lab"
	}
	lab, err := filepath.Abs("../lab.sh")
	if err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs("../loadtest.sh")
	svg := os.Getenv("IPVSCTL_LOADTEST_SVG") // where the chart goes (docs/performance.md's: docs/loadtest-lab.svg)
	if svg == "" {
		svg = filepath.Join(t.TempDir(), "loadtest.svg")
	}
	cmd := exec.Command(script, "--lab", "--keep", "--port", port, "--svg", svg, strconv.Itoa(secs))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t.Cleanup(func() { exec.Command(lab, "--stop").Run() })
	started := time.Now()
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-time.After(time.Duration(420+6*(secs+90)+60) * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		}
	}()
	out, err := cmd.CombinedOutput()
	close(done)
	t.Logf("scripts/loadtest.sh --lab took %s:\n%s", time.Since(started).Round(time.Second), out)
	if err != nil {
		t.Fatalf("scripts/loadtest.sh --lab: %v", err)
	}

	rows := map[string]loadLine{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[0] != "LOADTEST" || f[1] == "setting" {
			continue
		}
		r := loadLine{setting: f[1], via: f[2], p50: f[4], p99: f[5]}
		r.rps, _ = strconv.ParseFloat(f[3], 64)
		r.entries, _ = strconv.Atoi(f[8])
		r.bkts, _ = strconv.Atoi(f[9])
		rows[r.setting+" "+r.via] = r
	}
	for _, k := range []string{"default DR", "default NAT", "tuned DR", "tuned NAT", "again DR", "again NAT"} {
		r, ok := rows[k]
		if !ok || r.rps <= 0 || r.p99 == "" {
			t.Errorf("the table has no served run %q: %+v", k, r)
		}
	}
	if d, tu, a := rows["default DR"].bkts, rows["tuned DR"].bkts, rows["again DR"].bkts; d != 4096 || tu < d || a != d {
		t.Errorf("the connection table's buckets: %d on the defaults, %d tuned, %d after the undo (want 4096, at least that, 4096)", d, tu, a)
	}
	if b, err := os.ReadFile(svg); err != nil || bytes.Count(b, []byte("<rect ")) != 1+12+3 {
		t.Errorf("the SVG chart: %d rects (want the background, 2 groups x 2 VIPs x 3 settings, 3 legend keys), %v", bytes.Count(b, []byte("<rect ")), err)
	}

	env := map[string]string{}
	b, err := os.ReadFile(filepath.Join(labDir, "lab.env"))
	if err != nil {
		t.Fatalf("the lab kept running (--keep) has no lab.env: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, "=")
		env[k] = strings.Trim(v, "'")
	}
	url, token := "http://127.0.0.1:"+port, env["LAB_TOKEN"]
	var runs []struct {
		ID      int64  `json:"id"`
		Phase   string `json:"phase"`
		Service string `json:"service"`
		Result  *struct {
			RPS     float64 `json:"rps"`
			Buckets int     `json:"buckets"`
		} `json:"result"`
	}
	getJSON(t, url+"/api/v1/loadtest/runs", token, &runs)
	if len(runs) != 6 {
		t.Fatalf("the daemon has %d runs of the latest load test, want 6: %+v", len(runs), runs)
	}
	order := []string{"default DR", "default NAT", "tuned DR", "tuned NAT", "again DR", "again NAT"}
	for i, r := range runs {
		want := rows[order[i]]
		phase := map[string]string{"again": "default"}[want.setting]
		if phase == "" {
			phase = want.setting
		}
		svc := map[string]string{"DR": "web", "NAT": "web-nat"}[want.via]
		if r.Phase != phase || r.Service != svc || r.Result == nil || r.Result.RPS != want.rps || r.Result.Buckets != want.bkts {
			t.Errorf("run %d as the daemon marked it: %+v %+v, printed %+v", i+1, r, r.Result, want)
		}
	}
	var audit []struct {
		Action string `json:"action"`
	}
	getJSON(t, url+"/api/v1/audit?action=loadtest+end", token, &audit)
	if len(audit) != 6 {
		t.Errorf("the audit has %d loadtest end entries, want 6", len(audit))
	}

	br := browsertest.Start(t, 90*time.Second)
	br.Login(url+"/tuning", "admin", env["LAB_PASSWORD"], "#tuning-table")
	br.Do("tuning", chromedp.Navigate(url+"/tuning"), chromedp.WaitVisible(chromedp.CSS("#loadtest-runs")))
	phases := br.Eval(`Array.prototype.map.call(document.querySelectorAll("#loadtest-runs tbody tr"), function (r) { return r.cells[1].innerText.trim() }).join(" ")`)
	if phases != "default default tuned tuned default default" {
		t.Errorf("the Tuning page's runs, by phase: %q\n%s", phases, br.Text("#loadtest-runs"))
	}
	if n := br.Eval(`String(document.querySelectorAll("#loadtest svg.loadtest-chart polyline").length) + " " + String(document.querySelectorAll("#loadtest rect.band").length)`); n != "4 12" {
		t.Errorf("charts with points, bands: %s, want 4 (new and active connections of web and web-nat) and 12 (3 runs x 2 charts x 2 services)", n)
	}
	br.FitsWidth("the Tuning page with the lab's load test")
	br.Do("scroll to the load test", chromedp.ScrollIntoView(chromedp.CSS("#loadtest")))
	br.ShotWindow("lab-loadtest")

	if b, err := exec.Command(lab, "--stop").CombinedOutput(); err != nil || !strings.Contains(string(b), "the lab is stopped") {
		t.Errorf("lab.sh --stop: %v\n%s", err, b)
	}
}
