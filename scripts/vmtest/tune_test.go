//go:build vmtest

package vmtest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

type tuneFinding struct {
	Setting, Current, Recommended, Status, Value, Kind string
}

type tuneReport struct {
	Findings []tuneFinding
	Summary  string
	Reading  struct {
		Conns       int
		ConnTabBits int `json:"conn_tab_bits"`
	}
}

func (l *lab) tuneCheck(args ...string) tuneReport {
	l.t.Helper()
	out, err := l.ipvsctl(append([]string{"tune", "check", "--json"}, args...)...)
	if err != nil {
		l.t.Fatalf("ipvsctl tune check: %v\n%s", err, out)
	}
	var rep tuneReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		l.t.Fatalf("tune check --json: %v\n%s", err, out)
	}
	return rep
}

// sysctlIn is `sysctl -n` inside namespace ns: an independent reading.
func (l *lab) sysctlIn(ns, name string) string {
	l.t.Helper()
	return strings.TrimSpace(l.ns(ns, "sysctl -n "+name))
}

// ipvsSize is the connection table size ipvsadm reports ("size=4096").
func (l *lab) ipvsSize() int {
	l.t.Helper()
	out := l.ns(l.dir, "ipvsadm -Ln")
	i := strings.Index(out, "(size=")
	if i < 0 {
		l.t.Fatalf("ipvsadm -Ln has no size: %s", out)
	}
	n, err := strconv.Atoi(out[i+6 : i+6+strings.IndexByte(out[i+6:], ')')])
	if err != nil {
		l.t.Fatal(err)
	}
	return n
}

// reloadIPVS takes every ip_vs module out and loads ip_vs again, as the
// conn_tab_bits finding tells the operator to; deleted namespaces of other
// tests may hold the module a moment.
func reloadIPVS(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mods, _ := os.ReadFile("/proc/modules")
		var ours []string
		for _, line := range strings.Split(string(mods), "\n") {
			if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "ip_vs_") {
				ours = append(ours, f[0])
			}
		}
		out, err := exec.Command("modprobe", append([]string{"-r"}, append(ours, "ip_vs")...)...).CombinedOutput()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("modprobe -r ip_vs: %v\n%s", err, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
	run(t, "modprobe", "ip_vs")
}

// TestTuneCheckApplyUndoRealKernel: `tune check` on the real kernel reads
// what sysctl(8), ipvsadm and the module parameter say; `tune apply` sets
// the sysctls now (sysctl -n reads them back), writes a sysctl.d file that
// sysctl -p loads into a fresh namespace, and a modprobe.d option that
// modprobe reads and a reload of ip_vs takes (ipvsadm's size=); `tune undo`
// puts every value and file back.
func TestTuneCheckApplyUndoRealKernel(t *testing.T) {
	for _, f := range []string{"/etc/sysctl.d/90-ipvsctl.conf", "/etc/modprobe.d/ipvsctl.conf"} {
		if _, err := os.Stat(f); err == nil {
			t.Fatalf("%s exists before the test", f)
		}
	}
	l := newLab(t, 2, true)
	l.apply(fmt.Sprintf(`{"services":[
	 {"name":"web","address":"%s","port":80,"interface":"eth0","scheduler":"wlc","persistence":30,
	  "servers":[{"address":"198.18.0.11"},{"address":"198.18.0.12"}]},
	 {"name":"web-nat","address":"%s","port":8000,"scheduler":"rr","forwarding":"nat",
	  "servers":[{"address":"198.18.1.11","port":8080},{"address":"198.18.1.12","port":8080}]}]}`, vip, vip))
	l.get(vip+":80", 10)
	l.get(vip+":8000", 10)

	conns := func() int { return len(strings.Split(strings.TrimSpace(l.ns(l.dir, "ipvsadm -Lnc")), "\n")) - 2 }
	before := conns()
	rep := l.tuneCheck("--conn-rate", "200", "--lifetime", "200")
	if after := conns(); before == after && rep.Reading.Conns != before {
		t.Errorf("tune read %d connection entries, ipvsadm -Lnc lists %d", rep.Reading.Conns, before)
	}
	if before < 20 {
		t.Errorf("ipvsadm -Lnc lists %d entries after 20 connections", before)
	}
	if bits := strings.TrimSpace(run(t, "cat", "/sys/module/ip_vs/parameters/conn_tab_bits")); strconv.Itoa(rep.Reading.ConnTabBits) != bits || l.ipvsSize() != 1<<rep.Reading.ConnTabBits {
		t.Errorf("tune read conn_tab_bits %d; the module says %s, ipvsadm size=%d", rep.Reading.ConnTabBits, bits, l.ipvsSize())
	}
	initial := map[string]string{}
	byName := map[string]tuneFinding{}
	for _, f := range rep.Findings {
		byName[f.Setting] = f
		if strings.HasPrefix(f.Setting, "net.") {
			got := l.sysctlIn(l.dir, f.Setting)
			initial[f.Setting] = got
			if f.Current != got {
				t.Errorf("%s: tune read %q, sysctl -n %q", f.Setting, f.Current, got)
			}
		}
	}
	t.Logf("tune check: %s", rep.Summary)
	for name, want := range map[string]string{
		"ip_vs conn_tab_bits":                   "15",
		"net.ipv4.vs.conn_reuse_mode":           "2",
		"net.ipv4.vs.expire_quiescent_template": "1",
		"net.ipv4.ip_forward":                   "1",
	} {
		if f := byName[name]; f.Value != want {
			t.Errorf("%s: recommended %q, want %s (%+v)", name, f.Value, want, f)
		}
	}

	out, err := l.ipvsctl("tune", "apply", "--conn-rate", "200", "--lifetime", "200")
	if err != nil {
		t.Fatalf("tune apply: %v\n%s", err, out)
	}
	t.Logf("tune apply:\n%s", out)
	changed := map[string]string{}
	for _, f := range rep.Findings {
		if strings.HasPrefix(f.Setting, "net.") && (f.Status == "change" || f.Status == "far") {
			changed[f.Setting] = f.Value
			if got := l.sysctlIn(l.dir, f.Setting); got != f.Value {
				t.Errorf("after apply %s = %s (sysctl -n), want %s", f.Setting, got, f.Value)
			}
		}
	}
	if len(changed) == 0 {
		t.Fatal("tune apply changed no sysctl on a default kernel")
	}
	if rep2 := l.tuneCheck("--conn-rate", "200", "--lifetime", "200"); strings.Contains(rep2.Summary, " 0 to change") == false {
		// Only conn_tab_bits, which waits for a reload, may still be off.
		for _, f := range rep2.Findings {
			if f.Status != "ok" && f.Status != "info" && f.Setting != "ip_vs conn_tab_bits" {
				t.Errorf("after apply still %s: %+v", f.Status, f)
			}
		}
	}
	// The file loads with sysctl(8) itself, into a namespace that has the defaults.
	fresh := l.id + "fresh"
	run(t, "ip", "netns", "add", fresh)
	defer exec.Command("ip", "netns", "del", fresh).Run()
	l.ns(fresh, "sysctl -q -p /etc/sysctl.d/90-ipvsctl.conf")
	for name, want := range changed {
		if got := l.sysctlIn(fresh, name); got != want {
			t.Errorf("sysctl -p of the file in a fresh namespace: %s = %s, want %s", name, got, want)
		}
	}
	if cfg := run(t, "modprobe", "--showconfig"); !strings.Contains(cfg, "options ip_vs conn_tab_bits=15") {
		t.Errorf("modprobe --showconfig lacks conn_tab_bits=15")
	}
	// The reload the finding names: the services out, ip_vs out and in.
	l.ns(l.dir, "ipvsadm -C")
	reloadIPVS(t)
	if got := l.ipvsSize(); got != 1<<15 {
		t.Errorf("after the reload ipvsadm says size=%d, want %d", got, 1<<15)
	}
	if rep3 := l.tuneCheck("--conn-rate", "200", "--lifetime", "200"); rep3.Reading.ConnTabBits != 15 {
		t.Errorf("after the reload tune reads conn_tab_bits %d", rep3.Reading.ConnTabBits)
	}

	// Set the values again (the reload gave the namespace ip_vs's defaults),
	// so that undo has something to restore.
	if out, err := l.ipvsctl("tune", "apply", "--conn-rate", "200", "--lifetime", "200"); err != nil {
		t.Fatalf("tune apply after the reload: %v\n%s", err, out)
	}
	out, err = l.ipvsctl("tune", "undo")
	if err != nil {
		t.Fatalf("tune undo: %v\n%s", err, out)
	}
	t.Logf("tune undo:\n%s", out)
	for name := range changed {
		if got := l.sysctlIn(l.dir, name); got != initial[name] {
			t.Errorf("after undo %s = %s, want %s as before", name, got, initial[name])
		}
	}
	for _, f := range []string{"/etc/sysctl.d/90-ipvsctl.conf", "/etc/modprobe.d/ipvsctl.conf"} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s left after undo", f)
		}
	}
	if cfg := run(t, "modprobe", "--showconfig"); strings.Contains(cfg, "conn_tab_bits") {
		t.Errorf("modprobe --showconfig still sets conn_tab_bits after undo")
	}
	reloadIPVS(t)
	if got := l.ipvsSize(); got != 4096 {
		t.Errorf("after undo and a reload ipvsadm says size=%d, want 4096", got)
	}
}
