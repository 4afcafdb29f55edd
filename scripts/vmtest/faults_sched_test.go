//go:build vmtest

package vmtest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// moduleLoaded says whether the kernel has module name loaded (modules are
// the whole VM's, not a namespace's).
func moduleLoaded(name string) bool {
	_, err := os.Stat("/sys/module/" + name)
	return err == nil
}

// TestFaultSchedulerModuleUnloaded: a scheduler module is unloaded under
// traffic, as far as the kernel lets anyone. While a service uses wrr the
// kernel refuses `rmmod ip_vs_wrr` (each service bound to a scheduler holds a
// reference on its module: ip_vs_sched_getbyname's try_module_get, released
// when the service lets the scheduler go), so the table and the traffic are
// untouched. Another process then takes wrr off both services that use it
// (`ipvsadm -E ... -s rr`) and unloads the module, which the kernel now
// allows: the daemon (reconcile interval 3 s) finds the drift, puts wrr back
// (the kernel loads the module again itself: ip_vs_scheduler_get's
// request_module("ip_vs_%s")), logs the repair and counts it; the long-lived
// DR and NAT connections and every new request live through it all.
func TestFaultSchedulerModuleUnloaded(t *testing.T) {
	const interval = 3 * time.Second
	doc := faultDoc()
	// web (DR :80) and natecho (NAT :9001, a long-lived connection's) on wrr.
	doc = strings.Replace(doc, `"port":80,"interface":"eth0","scheduler":"rr"`, `"port":80,"interface":"eth0","scheduler":"wrr"`, 1)
	doc = strings.Replace(doc, `"port":9001,"interface":"eth0","forwarding":"nat","scheduler":"rr"`,
		`"port":9001,"interface":"eth0","forwarding":"nat","scheduler":"wrr"`, 1)
	if strings.Count(doc, `"wrr"`) != 2 {
		t.Fatalf("the document has %d wrr services, want 2:\n%s", strings.Count(doc, `"wrr"`), doc)
	}
	var tok string
	l, d := newFaultLabWith(t, func(l *lab) { tok = l.peerToken() }, doc, "--interval", interval.String())
	want := sortedLines(l.saved())
	if strings.Count(want, " -s wrr") != 2 || !moduleLoaded("ip_vs_wrr") {
		t.Fatalf("want two wrr services and ip_vs_wrr loaded (%v):\n%s", moduleLoaded("ip_vs_wrr"), want)
	}
	tr := l.startTraffic()
	time.Sleep(2 * time.Second)
	before := l.metric(tok, "ipvsctl_kernel_drift_repairs_total")

	// In use: refused.
	out, err := exec.Command("rmmod", "ip_vs_wrr").CombinedOutput()
	refused := strings.TrimSpace(string(out))
	if err == nil || !strings.Contains(refused, "in use") {
		t.Errorf("rmmod ip_vs_wrr while two services use it: %v, %q; want refused as in use", err, refused)
	}
	if !moduleLoaded("ip_vs_wrr") || sortedLines(l.saved()) != want {
		t.Fatalf("after the refused rmmod: module loaded %v, table:\n%s", moduleLoaded("ip_vs_wrr"), l.saved())
	}
	refcnt, _ := os.ReadFile("/sys/module/ip_vs_wrr/refcnt")
	t.Logf("rmmod ip_vs_wrr with two wrr services: %q (refcnt %s)", refused, strings.TrimSpace(string(refcnt)))

	// Taken off the services, then unloaded (one shell: an exec costs
	// hundreds of ms under emulation). The daemon's reconcile may put wrr
	// back between the edit and the unload, and a namespace of an earlier
	// test still being torn down may hold the module for a moment: again then.
	var rmErr string
	var unloadedAt time.Time
	switched := time.Now()
	if _, ok := waitUntil(30*time.Second, func() bool {
		out, err := exec.Command("ip", "netns", "exec", l.dir, "sh", "-c",
			"ipvsadm -E -t "+vip+":80 -s rr && ipvsadm -E -t "+vip+":9001 -s rr && rmmod ip_vs_wrr").CombinedOutput()
		if err != nil {
			rmErr = strings.TrimSpace(string(out))
			return false
		}
		unloadedAt = time.Now()
		return true
	}); !ok {
		t.Fatalf("rmmod ip_vs_wrr with no service of this test on wrr: %s", rmErr)
	}
	took, ok := waitUntil(interval+10*time.Second, func() bool { return sortedLines(l.saved()) == want })
	if !ok {
		t.Fatalf("wrr not put back %s after the module was unloaded:\n%s\nwant:\n%s", took, l.saved(), want)
	}
	took = time.Since(unloadedAt)
	if !moduleLoaded("ip_vs_wrr") {
		t.Errorf("the table says wrr but ip_vs_wrr is not loaded")
	}
	repaired := time.Now()
	// The next reconcile comes within the interval; putting wrr back then
	// waits for the kernel's own modprobe of ip_vs_wrr (a second or more under emulation).
	if took > interval+3*time.Second {
		t.Errorf("wrr put back %s after the unload, more than the reconcile interval %s and the module's load", took.Round(time.Millisecond), interval)
	}
	time.Sleep(2 * time.Second)
	rep := tr.report()
	if after := l.metric(tok, "ipvsctl_kernel_drift_repairs_total"); after < before+1 {
		t.Errorf("ipvsctl_kernel_drift_repairs_total %v after the repair, %v before", after, before)
	}
	d.stop(syscall.SIGTERM)
	if logs := d.all[len(d.all)-1]; !strings.Contains(logs, "kernel had drifted from the desired state; repaired") {
		t.Errorf("no repair in the daemon's log:\n%s", logs)
	}
	if len(rep.heldLost) > 0 {
		t.Errorf("lost %s", rep.lost())
	}
	// A scheduler change leaves the service without one for an RCU grace
	// period (ip_vs_edit_service: unbind, RCU_INIT_POINTER(svc->scheduler,
	// NULL), synchronize_rcu(), bind): a SYN then finds no destination and
	// the kernel answers ICMP port unreachable (ip_vs_leave), which the
	// client sees as a refused connection. So new requests may be refused
	// while the schedulers are switched (the other process's edits, the
	// repair), and at no other time.
	refusedInSwitch := 0
	for _, kind := range []string{"DR", "NAT"} {
		for _, r := range tr.streams[kind]() {
			if r.err == nil {
				continue
			}
			if strings.Contains(r.err.Error(), "connection refused") && !r.at.Before(switched.Add(-time.Second)) && !r.at.After(repaired.Add(time.Second)) {
				refusedInSwitch++
				continue
			}
			t.Errorf("%s request at %s failed outside the scheduler switches (%s to %s): %v", kind, r.at.Format("15:04:05.000"),
				switched.Format("15:04:05.000"), repaired.Format("15:04:05.000"), r.err)
		}
	}
	t.Logf("unloaded -> wrr back %s; %s; lost %s", took.Round(time.Millisecond), rep.kept(), rep.lost())
	lost := "nothing"
	if refusedInSwitch > 0 {
		lost = fmt.Sprintf("%d new requests (DR %d, NAT %d), refused by the kernel while a scheduler was switched (the other process's edit, the repair)",
			refusedInSwitch, rep.failedBy["DR"], rep.failedBy["NAT"])
	}
	faultRow(t, fmt.Sprintf("scheduler module unloaded, interval 3 s: rmmod while in use refused (%q); wrr taken off by another process (ipvsadm -E), then rmmod", refused),
		rep.kept()+"; the table; the repair logged and counted, the module loaded again by the kernel", lost, took)
}
