//go:build vmtest

package vmtest

import (
	"fmt"
	"github.com/ipvsctl/ipvsctl/internal/testenv"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// loadRun is one wrk run through a VIP.
type loadRun struct {
	label, target    string
	rps              float64
	p50, p99         string
	cpuBusy, softirq float64 // shares of the VM's CPU time during the run
	entries, buckets int     // the director's connection table at the end
	errors           string
}

// cpuTimes is /proc/stat's first line: total and softirq jiffies, and idle.
func cpuTimes(t *testing.T) (total, idle, softirq uint64) {
	t.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
	for i, v := range f[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		total += n
		switch i {
		case 3, 4: // idle, iowait
			idle += n
		case 6:
			softirq = n
		}
	}
	return total, idle, softirq
}

var (
	reRPS     = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	reLatency = regexp.MustCompile(`(?m)^\s+(50|99)%\s+(\S+)`)
	reErrors  = regexp.MustCompile(`(?m)^\s+(Socket errors:.*|Non-2xx or 3xx responses: \d+)$`)
)

// wrk runs Debian's wrk in the client namespace for d, a new connection per
// request (Connection: close), as many short HTTP exchanges a busy director
// forwards; it returns the run with the director's CPU and table read.
func (l *lab) wrk(label, target string, conns int, d time.Duration) loadRun {
	l.t.Helper()
	t0, i0, s0 := cpuTimes(l.t)
	out, err := exec.Command("ip", "netns", "exec", l.cli, "wrk", "-t2", fmt.Sprintf("-c%d", conns), fmt.Sprintf("-d%ds", int(d.Seconds())),
		"--timeout", "5s", "--latency", "-H", "Connection: close", "http://"+target+"/").CombinedOutput()
	if err != nil {
		l.t.Fatalf("wrk %s: %v\n%s", target, err, out)
	}
	t1, i1, s1 := cpuTimes(l.t)
	r := loadRun{label: label, target: target}
	m := reRPS.FindStringSubmatch(string(out))
	if m == nil {
		l.t.Fatalf("wrk printed no Requests/sec:\n%s", out)
	}
	r.rps, _ = strconv.ParseFloat(m[1], 64)
	for _, m := range reLatency.FindAllStringSubmatch(string(out), -1) {
		if m[1] == "50" {
			r.p50 = m[2]
		} else {
			r.p99 = m[2]
		}
	}
	for _, m := range reErrors.FindAllStringSubmatch(string(out), -1) {
		r.errors += strings.TrimSpace(m[1]) + " "
	}
	if dt := float64(t1 - t0); dt > 0 {
		r.cpuBusy = 1 - float64(i1-i0)/dt
		r.softirq = float64(s1-s0) / dt
	}
	r.entries = len(strings.Split(strings.TrimSpace(l.ns(l.dir, "cat /proc/net/ip_vs_conn")), "\n")) - 1
	r.buckets = l.ipvsSize()
	return r
}

// TestLoadTest is scripts/loadtest.sh: wrk through a DR and a NAT VIP on the
// kernel's defaults, then again after `ipvsctl tune apply` sized for the
// load just measured (conn_tab_bits with the reload it needs, the
// net.ipv4.vs sysctls) and the real servers' `realserver tune` floors set
// in their namespaces; requests/s, p50/p99, the VM's CPU and softirq share
// and the connection table's occupancy for each. Skipped unless
// IPVSCTL_LOADTEST=SECONDS (per run).
func TestLoadTest(t *testing.T) {
	secs, _ := strconv.Atoi(os.Getenv("IPVSCTL_LOADTEST"))
	if secs <= 0 {
		testenv.OptIn(t, "IPVSCTL_LOADTEST=SECONDS runs it (scripts/loadtest.sh)")
	}
	d := time.Duration(min(secs, 120)) * time.Second
	l := newLab(t, 2, true)
	doc := fmt.Sprintf(`{"services":[
	 {"name":"web","address":"%s","port":80,"interface":"eth0","scheduler":"rr",
	  "servers":[{"address":"198.18.0.11"},{"address":"198.18.0.12"}]},
	 {"name":"web-nat","address":"%s","port":8000,"scheduler":"rr","forwarding":"nat",
	  "servers":[{"address":"198.18.1.11","port":8080},{"address":"198.18.1.12","port":8080}]}]}`, vip, vip)
	l.apply(doc)
	// The client reuses its ports fast: its own limits are not under test.
	run(t, "ip", "netns", "exec", l.cli, "sysctl", "-qw", "net.ipv4.ip_local_port_range=10000 65000", "net.ipv4.tcp_tw_reuse=1")
	for _, f := range []string{"/etc/sysctl.d/90-ipvsctl.conf", "/etc/modprobe.d/ipvsctl.conf"} {
		os.Remove(f) // the VM's root is an overlay: nothing of the host's
	}
	var runs []loadRun
	runs = append(runs, l.wrk("default", vip+":80", 64, d), l.wrk("default", vip+":8000", 64, d))
	// Size the table for the load just seen: IPVS's own rate estimate lags,
	// so give the rate wrk measured and an entry's lifetime in the table
	// (DR: the FIN_WAIT timeout, 120 s; NAT: TIME_WAIT, also 120 s).
	rate := max(runs[0].rps, runs[1].rps)
	out, err := l.ipvsctl("tune", "apply", "--conn-rate", strconv.Itoa(int(rate)), "--lifetime", "120")
	if err != nil {
		t.Fatalf("tune apply: %v\n%s", err, out)
	}
	t.Logf("tune apply:\n%s", out)
	// The reload conn_tab_bits needs: the services out, ip_vs out and in, the state restored.
	l.ns(l.dir, "ipvsadm -C")
	reloadIPVS(t)
	l.ns(l.dir, "sysctl -q -p /etc/sysctl.d/90-ipvsctl.conf")
	if out, err := l.ipvsctl("restore"); err != nil {
		t.Fatalf("restore after the reload: %v\n%s", err, out)
	}
	for _, ns := range append(append([]string{}, l.rs...), l.nat...) {
		l.ns(ns, "sysctl -qw net.core.somaxconn=4096 net.ipv4.tcp_max_syn_backlog=8192 net.ipv4.tcp_max_tw_buckets=262144")
	}
	runs = append(runs, l.wrk("tuned", vip+":80", 64, d), l.wrk("tuned", vip+":8000", 64, d))
	rep := l.tuneCheck("--conn-rate", strconv.Itoa(int(rate)), "--lifetime", "120")
	t.Logf("after: %s", rep.Summary)

	var b strings.Builder
	fmt.Fprintf(&b, "LOADTEST wrk -t2 -c64 -d%ds -H 'Connection: close' (a new connection per request)\n", int(d.Seconds()))
	fmt.Fprintf(&b, "LOADTEST %-8s %-6s %10s %9s %9s %8s %8s %10s %10s %s\n", "setting", "VIP", "req/s", "p50", "p99", "CPU", "softirq", "entries", "buckets", "errors")
	for i, r := range runs {
		via := "DR"
		if strings.HasSuffix(r.target, ":8000") {
			via = "NAT"
		}
		fmt.Fprintf(&b, "LOADTEST %-8s %-6s %10.0f %9s %9s %7.0f%% %7.0f%% %10d %10d %s\n", r.label, via, r.rps, r.p50, r.p99,
			100*r.cpuBusy, 100*r.softirq, r.entries, r.buckets, strings.TrimSpace(r.errors))
		if i >= 2 {
			base := runs[i-2]
			fmt.Fprintf(&b, "LOADTEST   %s tuned/default: req/s %.2fx, entries per bucket %.1f -> %.1f\n", via, r.rps/base.rps,
				float64(base.entries)/float64(base.buckets), float64(r.entries)/float64(r.buckets))
		}
	}
	fmt.Print(b.String())
	// After the apply and the reload nothing is left to change, and the table has the size tune asked for.
	for _, f := range rep.Findings {
		if f.Status == "change" || f.Status == "far" {
			t.Errorf("after tune apply and the reload: %+v", f)
		}
		if f.Setting == "ip_vs conn_tab_bits" && strconv.Itoa(rep.Reading.ConnTabBits) != f.Value {
			t.Errorf("conn_tab_bits %d after the reload, tune recommends %s", rep.Reading.ConnTabBits, f.Value)
		}
	}
	if runs[2].buckets != 1<<rep.Reading.ConnTabBits {
		t.Errorf("ipvsadm says size=%d, the module 2^%d", runs[2].buckets, rep.Reading.ConnTabBits)
	}
	// Leave the kernel as the next test expects it.
	if out, err := l.ipvsctl("tune", "undo"); err != nil {
		t.Fatalf("tune undo: %v\n%s", err, out)
	}
	l.ns(l.dir, "ipvsadm -C")
	reloadIPVS(t)
}
