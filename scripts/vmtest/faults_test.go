//go:build vmtest

package vmtest

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"
)

// The fault matrix (scripts/faults.sh): each test breaks one thing under
// live traffic and says what was kept, what was lost and how long the
// repair took, in a FAULTROW line that faults.sh gathers into a table.

// faultRow is one row of the fault matrix's summary table.
func faultRow(t *testing.T, fault, kept, lost string, recovered time.Duration) {
	t.Helper()
	rec := "-"
	if recovered > 0 {
		rec = recovered.Round(10 * time.Millisecond).String()
	}
	t.Logf("FAULTROW | %s | %s | %s | %s |", fault, kept, lost, rec)
}

// faultDoc is a DR VIP (HTTP :80 and a line echo :9000 over two real
// servers) and a NAT one on the same address (HTTP :8000 and echo :9001 over
// two NAT real servers).
func faultDoc() string { return faultDocWith("") }

// faultDocWith is faultDoc with check (JSON fields, "" for none) on the web
// service.
func faultDocWith(check string) string {
	if check != "" {
		check = `"check":{` + check + `},`
	}
	dr := `{"name":"rs1","address":"198.18.0.11","weight":1},{"name":"rs2","address":"198.18.0.12","weight":1}`
	nat := func(port int) string {
		return fmt.Sprintf(`{"name":"nat1","address":"198.18.1.11","port":%d},{"name":"nat2","address":"198.18.1.12","port":%d}`, port, port)
	}
	return fmt.Sprintf(`{"settings":{"network":"dr"},"services":[
	{"name":"web","protocol":"tcp","address":"%[1]s","port":80,"interface":"eth0","scheduler":"rr",%[6]s"servers":[%[2]s]},
	{"name":"echo","protocol":"tcp","address":"%[1]s","port":%[3]d,"interface":"eth0","scheduler":"rr","servers":[%[2]s]},
	{"name":"natweb","protocol":"tcp","address":"%[1]s","port":8000,"interface":"eth0","forwarding":"nat","scheduler":"rr","servers":[%[4]s]},
	{"name":"natecho","protocol":"tcp","address":"%[1]s","port":9001,"interface":"eth0","forwarding":"nat","scheduler":"rr","servers":[%[5]s]}]}`,
		vip, dr, echoPort, nat(8080), nat(echoPort), check)
}

// newFaultLab is a director with two DR and two NAT real servers (each
// serving HTTP and the line echo) and its daemon (serve on 127.0.0.1:3636 of
// its namespace, with args) holding faultDoc.
func newFaultLab(t *testing.T, args ...string) (*lab, *director) {
	t.Helper()
	return newFaultLabWith(t, nil, faultDoc(), args...)
}

// newFaultLabWith is newFaultLab with setup run on the lab before the
// daemon starts, and doc as the desired state.
func newFaultLabWith(t *testing.T, setup func(*lab), doc string, args ...string) (*lab, *director) {
	t.Helper()
	l := newLab(t, 2, true)
	if setup != nil {
		setup(l)
	}
	for _, ns := range append(slices.Clone(l.rs), l.nat...) {
		l.serveEcho(ns, ns[len(l.id):])
	}
	d := &director{l: l, addr: "127.0.0.1", args: args}
	t.Cleanup(func() {
		d.stop(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("daemon logs:\n%s", strings.Join(d.all, "\n--- restarted ---\n"))
		}
	})
	d.start()
	l.apply(doc)
	return l, d
}

// metric reads one unlabelled sample from the daemon's /metrics.
func (l *lab) metric(token, name string) float64 {
	l.t.Helper()
	// The transport dials from its own goroutines: each dial enters the namespace itself.
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		var err error
		inNS(l.t, l.dir, func() { c, err = (&net.Dialer{}).DialContext(ctx, network, addr) })
		return c, err
	}
	req, _ := http.NewRequest("GET", "http://127.0.0.1:3636/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		l.t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				l.t.Fatalf("metric %s: %q", name, v)
			}
			return f
		}
	}
	l.t.Fatalf("no metric %s in /metrics (%s)", name, resp.Status)
	return 0
}

// traffic is what a fault runs against: a long-lived echo connection
// through the DR VIP and one through the NAT VIP, and a stream of new HTTP
// requests through each (one every 100 ms, bounded).
type traffic struct {
	l       *lab
	held    map[string]*holder
	stop    chan struct{}
	streams map[string]func() []result
}

func (l *lab) startTraffic() *traffic {
	l.t.Helper()
	tr := &traffic{l: l, stop: make(chan struct{}),
		held:    map[string]*holder{"DR": l.hold(vip + ":" + strconv.Itoa(echoPort)), "NAT": l.hold(vip + ":9001")},
		streams: map[string]func() []result{}}
	tr.streams["DR"] = l.stream(vip+":80", 100*time.Millisecond, 1200, tr.stop)
	tr.streams["NAT"] = l.stream(vip+":8000", 100*time.Millisecond, 1200, tr.stop)
	l.t.Cleanup(tr.end)
	return tr
}

// trafficReport is what the traffic kept and lost.
type trafficReport struct {
	heldOK, heldLost []string       // the long-lived connections that lived on, and those that did not (with why)
	requests, failed int            // new requests made, and those not answered
	lastFail         time.Time      // when the last failed request was made
	failedBy         map[string]int // failed requests by VIP kind
	firstErr         map[string]error
}

// end stops the traffic (once) and reports.
func (tr *traffic) end() {
	select {
	case <-tr.stop:
	default:
		close(tr.stop)
	}
}

func (tr *traffic) report() trafficReport {
	tr.end()
	rep := trafficReport{failedBy: map[string]int{}, firstErr: map[string]error{}}
	for _, kind := range []string{"DR", "NAT"} {
		h := tr.held[kind]
		echoed, gap, err := h.state()
		h.close()
		if err != nil || echoed == 0 {
			rep.heldLost = append(rep.heldLost, fmt.Sprintf("%s (%d echoed: %v)", kind, echoed, err))
		} else {
			rep.heldOK = append(rep.heldOK, fmt.Sprintf("%s (%d lines, longest gap %s)", kind, echoed, gap.Round(time.Millisecond)))
		}
		for _, r := range tr.streams[kind]() {
			rep.requests++
			if r.err != nil {
				rep.failed++
				rep.failedBy[kind]++
				if rep.firstErr[kind] == nil {
					rep.firstErr[kind] = r.err
				}
				if r.at.After(rep.lastFail) {
					rep.lastFail = r.at
				}
			}
		}
	}
	return rep
}

func (r trafficReport) kept() string {
	return fmt.Sprintf("%d/2 long-lived (DR, NAT), %d/%d new requests", len(r.heldOK), r.requests-r.failed, r.requests)
}

func (r trafficReport) lost() string {
	if r.failed == 0 && len(r.heldLost) == 0 {
		return "nothing"
	}
	var parts []string
	if r.failed > 0 {
		parts = append(parts, fmt.Sprintf("%d new requests (DR %d, NAT %d)", r.failed, r.failedBy["DR"], r.failedBy["NAT"]))
	}
	parts = append(parts, r.heldLost...)
	return strings.Join(parts, ", ")
}

// sortedLines is s's lines in order, for comparing tables whose order the
// kernel's hash decides.
func sortedLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// waitUntil polls ok every 50 ms for at most limit and says how long it took.
func waitUntil(limit time.Duration, ok func() bool) (time.Duration, bool) {
	start := time.Now()
	for {
		if ok() {
			return time.Since(start), true
		}
		if time.Since(start) > limit {
			return time.Since(start), false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFaultTableFlushed: another process flushes the whole IPVS table
// (`ipvsadm -C`) under traffic. The daemon (reconcile interval 3 s) puts it
// back within the interval, says so in its log and in
// ipvsctl_kernel_drift_repairs_total, and every new request made after the
// repair is answered. The long-lived connections do not survive, and cannot:
// with its last service gone the kernel unregisters IPVS's netfilter hooks
// (since 5.8, "ipvs: register hooks only with services"), so their next
// segment reaches the director's own TCP stack, which holds the VIP and
// answers with a reset. The test says so when it happens.
func TestFaultTableFlushed(t *testing.T) {
	const interval = 3 * time.Second
	var tok string // a viewer's, for the metrics (hashing its password is slow under emulation: only here)
	l, d := newFaultLabWith(t, func(l *lab) { tok = l.peerToken() }, faultDoc(), "--interval", interval.String())
	want := sortedLines(l.saved())
	tr := l.startTraffic()
	time.Sleep(2 * time.Second)
	before := l.metric(tok, "ipvsctl_kernel_drift_repairs_total")
	l.ns(l.dir, "ipvsadm -C")
	took, ok := waitUntil(interval+5*time.Second, func() bool { return sortedLines(l.saved()) == want })
	if !ok {
		t.Fatalf("table not repaired %s after ipvsadm -C:\n%s\nwant:\n%s", took, l.saved(), want)
	}
	if took > interval+time.Second {
		t.Errorf("table repaired %s after the flush, more than the reconcile interval %s", took.Round(time.Millisecond), interval)
	}
	repaired := time.Now()
	time.Sleep(3 * time.Second)
	rep := tr.report()
	if after := l.metric(tok, "ipvsctl_kernel_drift_repairs_total"); after < before+1 {
		t.Errorf("ipvsctl_kernel_drift_repairs_total %v after the repair, %v before", after, before)
	}
	if n := l.metric(tok, "ipvsctl_kernel_drift_repaired_changes_total"); n < 4+8 {
		t.Errorf("ipvsctl_kernel_drift_repaired_changes_total %v, want at least the 4 services and 8 real servers", n)
	}
	d.stop(syscall.SIGTERM)
	if logs := d.all[len(d.all)-1]; !strings.Contains(logs, "kernel had drifted from the desired state; repaired") {
		t.Errorf("no repair in the daemon's log:\n%s", logs)
	}
	for _, h := range rep.heldLost {
		if !strings.Contains(h, "connection reset by peer") {
			t.Errorf("a long-lived connection ended otherwise than by the director's reset: %s", h)
		}
	}
	if rep.lastFail.After(repaired) {
		t.Errorf("a new request failed %s after the repair (DR: %v, NAT: %v)", rep.lastFail.Sub(repaired).Round(time.Millisecond),
			rep.firstErr["DR"], rep.firstErr["NAT"])
	}
	t.Logf("flush -> repaired %s; %s; lost %s", took.Round(time.Millisecond), rep.kept(), rep.lost())
	lost := fmt.Sprintf("%d new requests (DR %d, NAT %d) until the repair", rep.failed, rep.failedBy["DR"], rep.failedBy["NAT"])
	if len(rep.heldLost) > 0 {
		lost += fmt.Sprintf("; %d/2 long-lived, reset by the kernel (no service left: IPVS's hooks go)", len(rep.heldLost))
	}
	faultRow(t, "table flushed (ipvsadm -C), interval 3 s", rep.kept()+"; repair logged and counted", lost, took)
}

// bigDoc is faultDoc with n more services of ten real servers each (no
// VIPs: addresses the director does not bring up).
func bigDoc(t *testing.T, n int) string {
	t.Helper()
	var st map[string]any
	if err := json.Unmarshal([]byte(faultDoc()), &st); err != nil {
		t.Fatal(err)
	}
	svcs := st["services"].([]any)
	for i := range n {
		var servers []any
		for j := range 10 {
			servers = append(servers, map[string]any{"name": fmt.Sprintf("r%d", j), "address": fmt.Sprintf("198.18.0.%d", 11+j)})
		}
		svcs = append(svcs, map[string]any{"name": fmt.Sprintf("s%d", i), "protocol": "tcp",
			"address": fmt.Sprintf("198.18.%d.%d", 100+i/250, 1+i%250), "port": 80, "scheduler": "wlc", "servers": servers})
	}
	st["services"] = svcs
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// ipvsEntries counts the services and real servers in the director's
// kernel table (a read of /proc/net/ip_vs from its namespace).
func (l *lab) ipvsEntries() int {
	var n int
	inNS(l.t, l.dir, func() {
		b, _ := os.ReadFile("/proc/thread-self/net/ip_vs")
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "TCP ") || strings.HasPrefix(line, "UDP ") || strings.HasPrefix(line, "  -> ") && !strings.Contains(line, "RemoteAddress") {
				n++
			}
		}
	})
	return n
}

// vipCount is how many times the VIP is on the director's links.
func (l *lab) vipCount() int {
	out := l.ns(l.dir, "ip -o addr show")
	return strings.Count(out, " "+vip+"/")
}

// TestFaultDaemonKilledMidReconcile: the daemon is killed with SIGKILL in
// the middle of the reconcile of a change that takes the table to 11,000
// entries (4 live services and 1,000 more of ten real servers), under
// traffic. The kernel keeps serving while no daemon runs; the restarted
// daemon converges to the stored revision (and a second reconcile changes
// nothing); the VIP is on the link once; the long-lived DR and NAT
// connections and every new request live through it. Printed: the time
// from the restart to the whole table, ipvsctl apply of the same table to a
// fresh namespace's kernel beside it.
func TestFaultDaemonKilledMidReconcile(t *testing.T) {
	l, d := newFaultLab(t)
	const extra = 1000
	want := 4*2 + 4 + extra*11 // the four live services (with their two servers) and the new ones
	doc := bigDoc(t, extra)
	f := t.TempDir() + "/big.json"
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	tr := l.startTraffic()
	time.Sleep(time.Second)
	apply := exec.Command("ip", "netns", "exec", l.dir, os.Getenv("IPVSCTL_BIN"), "--db", l.db, "apply", "-f", f)
	var out strings.Builder
	apply.Stdout, apply.Stderr = &out, &out
	if err := apply.Start(); err != nil {
		t.Fatal(err)
	}
	if _, ok := waitUntil(120*time.Second, func() bool { return l.ipvsEntries() > 12+500 }); !ok {
		t.Fatalf("the table never started to fill: %d entries\n%s", l.ipvsEntries(), out.String())
	}
	d.stop(syscall.SIGKILL)
	apply.Wait()
	partial := l.ipvsEntries()
	t.Logf("daemon killed with %d of %d entries in the kernel; apply said: %s", partial, want, strings.TrimSpace(out.String()))
	if partial >= want {
		t.Fatal("the reconcile finished before the daemon could be killed")
	}
	time.Sleep(2 * time.Second) // the kernel serves alone
	restarted := time.Now()
	d.start()
	took, ok := waitUntil(180*time.Second, func() bool { return l.ipvsEntries() == want })
	if !ok {
		t.Fatalf("restarted daemon: %d entries after %s, want %d", l.ipvsEntries(), took, want)
	}
	took = time.Since(restarted)
	if diff := l.cmdOut("diff"); strings.TrimSpace(diff) != "# kernel matches the desired state" {
		t.Errorf("ipvsctl diff after the restart:\n%s", diff)
	}
	if n := l.vipCount(); n != 1 {
		t.Errorf("the VIP is on the director's links %d times:\n%s", n, l.ns(l.dir, "ip -o addr show"))
	}
	time.Sleep(2 * time.Second)
	rep := tr.report()
	if len(rep.heldLost) > 0 || rep.failed > 0 {
		t.Errorf("lost %s (DR: %v, NAT: %v)", rep.lost(), rep.firstErr["DR"], rep.firstErr["NAT"])
	}
	// The same table applied by a fresh process to a fresh namespace: the reference for the restart's time.
	ref := newLab(t, 0, false)
	start := time.Now()
	ref.apply(bigDoc(t, extra))
	fresh := time.Since(start)
	t.Logf("BENCH restart after SIGKILL -> %d entries in %s; ipvsctl apply of the same table to an empty kernel %s (ratio %.2f)",
		want, took.Round(time.Millisecond), fresh.Round(time.Millisecond), took.Seconds()/fresh.Seconds())
	faultRow(t, fmt.Sprintf("daemon SIGKILLed mid-reconcile (%d of %d entries)", partial, want), rep.kept(), rep.lost(), took)
}

// exitStatus is the exit status of a command that ran (-1 if it did not).
func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// TestFaultDiskFull: the database lives on a 3 MB tmpfs that fills up
// (another file takes the rest) under traffic, with HTTP checks on the web
// service. A large change is refused with a message saying the disk is
// full, exit status 1, and the kernel keeps the last good table; the checks
// go on (a real server whose check port starts refusing is quiesced, and
// comes back when it answers again) and the daemon keeps running; once
// there is room the same change is stored and applied. The long-lived
// connections and the new requests live through it all.
func TestFaultDiskFull(t *testing.T) {
	dir := t.TempDir() + "/small"
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	run(t, "mount", "-t", "tmpfs", "-o", "size=3m,mode=0700", "tmpfs", dir)
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	// Generous timings: what matters here is that checks go on, not how fast.
	check := `"type":"http","path":"/","port":8080,"interval":2,"timeout":1.8,"rise":1,"fall":2,"on_failure":"quiesce"`
	l, d := newFaultLabWith(t, func(l *lab) { l.db = dir + "/ipvsctl.db" }, faultDocWith(check))
	web := vip + ":80"
	up := map[string]int{"198.18.0.11:80": 1, "198.18.0.12:80": 1}
	waitFor(t, "both web servers up", 60*time.Second, func() bool { return maps.Equal(l.weightsOf(web), up) })
	tr := l.startTraffic()
	before := sortedLines(l.saved())

	f, err := os.Create(dir + "/filler")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	f.Close()
	full := time.Now()
	big := t.TempDir() + "/big.json"
	if err := os.WriteFile(big, []byte(bigDoc(t, 300)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := l.ipvsctl("apply", "-f", big)
	if exitStatus(err) != 1 || !strings.Contains(out, "filesystem is full: nothing was stored; free space there and try again") {
		t.Errorf("apply on a full disk: exit status %d, said:\n%s", exitStatus(err), out)
	}
	if got := sortedLines(l.saved()); got != before {
		t.Errorf("the kernel's table changed after the refused write:\n%s", got)
	}
	// The checks go on with nowhere to store their results.
	l.ns(l.rs[0], "iptables -A INPUT -p tcp --dport 8080 -j REJECT --reject-with tcp-reset")
	if took, ok := waitUntil(30*time.Second, func() bool { return l.weightsOf(web)["198.18.0.11:80"] == 0 }); !ok {
		t.Errorf("rs1 failing its check on a full disk: not quiesced after %s: %v", took, l.weightsOf(web))
	}
	l.ns(l.rs[0], "iptables -D INPUT -p tcp --dport 8080 -j REJECT --reject-with tcp-reset")
	if took, ok := waitUntil(30*time.Second, func() bool { return maps.Equal(l.weightsOf(web), up) }); !ok {
		t.Errorf("rs1 answering its check again on a full disk: not back after %s: %v", took, l.weightsOf(web))
	}
	select {
	case <-d.done:
		t.Fatalf("the daemon exited on a full disk")
	default:
	}
	if err := os.Remove(dir + "/filler"); err != nil {
		t.Fatal(err)
	}
	if out, err := l.ipvsctl("apply", "-f", big); err != nil {
		t.Errorf("apply once there is room: %v\n%s", err, out)
	}
	recovered := time.Since(full)
	if n, want := l.ipvsEntries(), 12+300*11; n != want {
		t.Errorf("after the write with room: %d entries in the kernel, want %d", n, want)
	}
	time.Sleep(time.Second)
	rep := tr.report()
	if len(rep.heldLost) > 0 || rep.failed > 0 {
		t.Errorf("lost %s (DR: %v, NAT: %v)", rep.lost(), rep.firstErr["DR"], rep.firstErr["NAT"])
	}
	d.stop(syscall.SIGTERM)
	t.Logf("daemon log:\n%s", d.all[len(d.all)-1])
	faultRow(t, "disk full (3 MB tmpfs for the database)", rep.kept()+"; table, health checks", rep.lost()+"; the write (refused, exit 1)", recovered)
}

// TestFaultDatabaseDamaged: the daemon stopped, its database is replaced by
// one from a newer ipvsctl, then damaged in its header, then in a page of
// its revisions. Each time `ipvsctl restore` and `ipvsctl serve` refuse
// (exit status 1) with a message saying what to do, and the kernel's table
// and VIP stay as they were, serving the traffic; with the good file back
// the daemon starts and changes nothing.
func TestFaultDatabaseDamaged(t *testing.T) {
	l, d := newFaultLab(t)
	tr := l.startTraffic()
	d.stop(syscall.SIGTERM)
	before := sortedLines(l.saved())
	good, err := os.ReadFile(l.db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(l.db + "-wal"); err == nil {
		t.Fatalf("%s-wal left after the daemon stopped", l.db)
	}
	damage := []struct {
		name, want string
		do         func()
	}{
		{"schema from a newer ipvsctl", "upgrade ipvsctl", func() {
			db, err := sql.Open("sqlite3", l.db)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'future', 'now')`); err != nil {
				t.Fatal(err)
			}
		}},
		{"header overwritten", "ipvsadm -Sn | ipvsctl import --format ipvsadm --no-apply -", func() { garble(t, l.db, 0) }},
		{"a page of the revisions overwritten", "ipvsadm -Sn | ipvsctl import --format ipvsadm --no-apply -", func() { garble(t, l.db, 2*4096) }},
	}
	for _, dm := range damage {
		dm.do()
		for _, verb := range [][]string{{"restore"}, {"serve", "--listen", ""}} {
			cmd := exec.Command("timeout", append([]string{"30", "ip", "netns", "exec", l.dir, os.Getenv("IPVSCTL_BIN"), "--db", l.db}, verb...)...)
			out, err := cmd.CombinedOutput()
			if exitStatus(err) != 1 || !strings.Contains(string(out), dm.want) {
				t.Errorf("%s: ipvsctl %s: exit status %d, want 1 with %q; said:\n%s", dm.name, verb[0], exitStatus(err), dm.want, out)
			}
		}
		if got := sortedLines(l.saved()); got != before {
			t.Errorf("%s: the kernel's table changed:\n%s", dm.name, got)
		}
		if n := l.vipCount(); n != 1 {
			t.Errorf("%s: the VIP is on the director %d times", dm.name, n)
		}
		if err := os.WriteFile(l.db, good, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d.start()
	if diff := l.cmdOut("diff"); strings.TrimSpace(diff) != "# kernel matches the desired state" {
		t.Errorf("ipvsctl diff with the good database back:\n%s", diff)
	}
	rep := tr.report()
	if len(rep.heldLost) > 0 || rep.failed > 0 {
		t.Errorf("lost %s (DR: %v, NAT: %v)", rep.lost(), rep.firstErr["DR"], rep.firstErr["NAT"])
	}
	faultRow(t, "database from a newer ipvsctl / damaged header / damaged page", rep.kept()+"; kernel table, VIP",
		rep.lost()+"; restore and serve refuse (exit 1, say what to do)", 0)
}

// garble overwrites 4 KB of the file at offset.
func garble(t *testing.T, path string, offset int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte(strings.Repeat("\xffgarbage", 512)), offset); err != nil {
		t.Fatal(err)
	}
}
