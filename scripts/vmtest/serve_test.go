//go:build vmtest

package vmtest

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
)

// servedLab is a lab whose director runs `ipvsctl serve` with the API on the
// lab segment and the metrics on the director's loopback, and an admin token.
func servedLab(t *testing.T, nRS int) (*lab, *daemon, string) {
	t.Helper()
	l := newLab(t, nRS, false)
	tok := l.adminToken()
	d := l.serve(nil, "--listen", apiAddr, "--metrics-listen", metricsAddr)
	return l, d, tok
}

// remote runs the CLI in the client namespace against the director's API.
func (l *lab) remote(tok string, args ...string) string {
	l.t.Helper()
	out, err := l.ipvsctlIn(l.cli, "", nil, append([]string{"--server", "http://" + apiAddr, "--token", tok}, args...)...)
	if err != nil {
		l.t.Fatalf("remote ipvsctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// curl runs curl in the client namespace against the director's API and
// returns the body; a status other than 2xx fails the test.
func (l *lab) curl(tok, method, path, body string) string {
	l.t.Helper()
	args := []string{"netns", "exec", l.cli, "curl", "-sS", "--max-time", "60", "--fail-with-body", "-X", method,
		"-H", "Authorization: Bearer " + tok}
	if body != "" {
		args = append(args, "-H", "Content-Type: application/json", "--data", body)
	}
	return run(l.t, "ip", append(args, "http://"+apiAddr+path)...)
}

// A remote CLI session and plain HTTP (curl and Go) through the API add a
// service and real servers, change a weight and drain one; ipvsadm reads
// each change back, and real traffic through the VIP follows it.
func TestServeRemoteCLIAndAPI(t *testing.T) {
	l, _, tok := servedLab(t, 2)

	l.remote(tok, "vs", "add", "web", "--address", vip, "--port", "80", "--interface", "eth0", "--scheduler", "wrr")
	if got := l.saved(); got != "-A -t 198.18.0.100:80 -s wrr\n" {
		t.Fatalf("after remote vs add, ipvsadm -Sn:\n%s", got)
	}
	l.remote(tok, "rs", "add", "web", "--name", "rs1", "--address", "198.18.0.11")
	if got := l.saved(); !strings.Contains(got, "-a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 1\n") {
		t.Fatalf("after remote rs add, ipvsadm -Sn:\n%s", got)
	}

	// curl, as an operator's script would.
	var wr writeResult
	out := l.curl(tok, "POST", "/api/v1/services/web/servers", `{"name":"rs2","address":"198.18.0.12","weight":3}`)
	if err := json.Unmarshal([]byte(out), &wr); err != nil || !wr.Changed || !wr.Applied || len(wr.Failures) != 0 {
		t.Fatalf("curl POST servers answered %s (%v)", out, err)
	}
	want := "-A -t 198.18.0.100:80 -s wrr\n" +
		"-a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 1\n" +
		"-a -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 3\n"
	if got := l.saved(); got != want {
		t.Fatalf("after curl POST servers, ipvsadm -Sn:\n%s\nwant:\n%s", got, want)
	}
	if c := l.get(vip+":80", 8); c["rs1"] != 2 || c["rs2"] != 6 {
		t.Fatalf("wrr 1:3 over 8 requests: %v", c)
	}

	// Go's net/http from the client namespace: a weight change by PATCH, then a drain.
	api := nsClient(l.cli, "http://"+apiAddr, tok)
	api.must(t, "PATCH", "/api/v1/services/web/servers/rs1", `{"weight":2}`, &wr)
	if !wr.Applied || !strings.Contains(l.saved(), "-r 198.18.0.11:80 -g -w 2\n") {
		t.Fatalf("after PATCH weight 2 (%+v), ipvsadm -Sn:\n%s", wr, l.saved())
	}
	if code, b, _ := api.call("PATCH", "/api/v1/services/web/servers/rs1", `{"weight":70000}`); code != 422 || !strings.Contains(string(b), "weight") {
		t.Fatalf("PATCH weight 70000: %d %s", code, b)
	}
	if code, _, _ := nsClient(l.cli, "http://"+apiAddr, "").call("POST", "/api/v1/services/web/servers/rs1/drain", ""); code != 401 {
		t.Fatalf("drain without a token: %d, want 401", code)
	}
	l.curl(tok, "POST", "/api/v1/services/web/servers/rs2/drain", "")
	want = "-A -t 198.18.0.100:80 -s wrr\n" +
		"-a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 2\n" +
		"-a -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 0\n"
	if got := l.saved(); got != want {
		t.Fatalf("after drain, ipvsadm -Sn:\n%s\nwant:\n%s", got, want)
	}
	if c := l.get(vip+":80", 4); c["rs1"] != 4 {
		t.Fatalf("new connections reach the drained server: %v", c)
	}
	// The remote CLI drains too, and reads the history the API wrote.
	l.remote(tok, "rs", "drain", "web", "rs1")
	if got := l.saved(); !strings.Contains(got, "-r 198.18.0.11:80 -g -w 0\n") {
		t.Fatalf("after remote rs drain, ipvsadm -Sn:\n%s", got)
	}
	var hist []struct {
		ID      int64  `json:"id"`
		Author  string `json:"author"`
		Via     string `json:"via"`
		Summary string `json:"summary"`
	}
	if err := json.Unmarshal([]byte(l.remote(tok, "history", "--json", "--limit", "10")), &hist); err != nil {
		t.Fatal(err)
	}
	if len(hist) != 6 {
		t.Fatalf("history has %d revisions, want 6: %+v", len(hist), hist)
	}
	for _, h := range hist {
		if h.Author != "admin" || h.Via != "api" {
			t.Errorf("revision %d by %s via %s, want admin via api (%s)", h.ID, h.Author, h.Via, h.Summary)
		}
	}
	// The remote status is the daemon's snapshot of the same table.
	if st := l.remote(tok, "status"); !strings.Contains(st, "TCP  198.18.0.100:80 wrr") {
		t.Fatalf("remote status:\n%s", st)
	}
}

// applyRemote sends a document through the remote CLI's apply.
func (l *lab) applyRemote(tok, doc string) string {
	l.t.Helper()
	f := l.t.TempDir() + "/state.json"
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		l.t.Fatal(err)
	}
	return l.remote(tok, "apply", "-f", f)
}

// After real traffic through the VIP, /metrics (from the daemon's 2 s
// snapshot) agrees with what `ipvsadm -Ln --stats --exact` reads from the
// kernel, counter by counter, for the service and each real server.
func TestServeMetricsAgreeWithIpvsadm(t *testing.T) {
	l, _, tok := servedLab(t, 2)
	l.applyRemote(tok, drDoc("rr", rs12))
	if c := l.get(vip+":80", 30); c["rs1"] != 15 || c["rs2"] != 15 {
		t.Fatalf("round robin over 30 requests: %v", c)
	}
	// The kernel sums its per-CPU counters every 2 s; the daemon reads them every 2 s.
	var kern ipvsCounters
	waitFor(t, "the kernel's counters to show 30 connections", 15*time.Second, func() bool {
		kern = statsOfIpvsadm(t, l.ns(l.dir, "ipvsadm -Ln --stats --exact"))
		return kern["TCP 198.18.0.100:80"][0] == 30
	})
	metrics := nsClient(l.dir, "http://"+metricsAddr, "")
	var got ipvsCounters
	var plain map[string]float64
	var last string
	ok := false
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		kern = statsOfIpvsadm(t, l.ns(l.dir, "ipvsadm -Ln --stats --exact"))
		b := metrics.must(t, "GET", "/metrics", "", nil)
		got, plain = statsOfMetrics(t, string(b))
		last = fmt.Sprintf("ipvsadm: %v\nmetrics: %v", kern, got)
		if len(kern) == 3 && fmt.Sprint(kern) == fmt.Sprint(got) {
			ok = true
			break
		}
	}
	if !ok {
		t.Fatalf("/metrics never agreed with ipvsadm -Ln --stats --exact within 20 s:\n%s", last)
	}
	t.Logf("agreed (conns, inpkts, outpkts, inbytes, outbytes):\n%s", last)
	for k, want := range map[string]float64{
		"ipvsctl_kernel_available": 1,
		"ipvsctl_desired_revision": 1,
		`ipvsctl_backend_weight{local_address="198.18.0.100",local_mark="",local_port="80",proto="TCP",remote_address="198.18.0.12",remote_port="80"}`: 1,
	} {
		if plain[k] != want {
			t.Errorf("%s = %v, want %v", k, plain[k], want)
		}
	}
	if plain["ipvsctl_kernel_reads_total"] < 1 {
		t.Errorf("ipvsctl_kernel_reads_total = %v", plain["ipvsctl_kernel_reads_total"])
	}
	// With its own listener, /metrics is not on the API's.
	if code, _, _ := nsClient(l.cli, "http://"+apiAddr, tok).call("GET", "/metrics", ""); code != 404 {
		t.Errorf("/metrics on the API listener with --metrics-listen: %d, want 404", code)
	}
}

// SIGTERM to serve while writers stream weight changes through the API loses
// nothing: every write answered 200 is in the history and in the kernel,
// the kernel has exactly what the store has (nothing half-applied), and
// after the kernel is wiped and serve restarts, the same table comes back.
func TestServeSIGTERMDuringWritesLosesNothing(t *testing.T) {
	l, d, tok := servedLab(t, 0)
	l.applyRemote(tok, drDoc("rr", `{"name":"w1","address":"198.18.0.11"},{"name":"w2","address":"198.18.0.12"},{"name":"w3","address":"198.18.0.13"}`))
	type writer struct {
		mu        sync.Mutex
		acked     int // the last weight answered 200
		attempted int // the last weight sent
		revs      []int64
		lastAck   time.Time
		stopErr   string
	}
	ws := make([]*writer, 3)
	var wg sync.WaitGroup
	deadline := time.Now().Add(120 * time.Second)
	for i := range ws {
		w := &writer{acked: 1}
		ws[i] = w
		api := nsClient(l.cli, "http://"+apiAddr, tok)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for weight := 2; weight <= 1000 && time.Now().Before(deadline); weight++ {
				w.mu.Lock()
				w.attempted = weight
				w.mu.Unlock()
				code, b, err := api.call("PATCH", fmt.Sprintf("/api/v1/services/web/servers/w%d", i+1), fmt.Sprintf(`{"weight":%d}`, weight))
				var wr writeResult
				if err == nil && code == 200 {
					err = json.Unmarshal(b, &wr)
				}
				w.mu.Lock()
				if err != nil || code != 200 {
					w.stopErr = fmt.Sprintf("weight %d: %d %v %s", weight, code, err, b)
					w.mu.Unlock()
					return
				}
				w.acked, w.lastAck = weight, time.Now()
				w.revs = append(w.revs, wr.Revision)
				w.mu.Unlock()
			}
		}()
	}
	waitFor(t, "every writer to have 5 writes answered", 60*time.Second, func() bool {
		for _, w := range ws {
			w.mu.Lock()
			n := len(w.revs)
			w.mu.Unlock()
			if n < 5 {
				return false
			}
		}
		return true
	})
	sigterm := time.Now()
	d.stop()
	wg.Wait()
	if !strings.Contains(d.out.String(), "ipvsctl stopped") {
		t.Errorf("serve did not say it stopped:\n%s", d.out.String())
	}
	stored := weights(l.local("export", "--format", "ipvsadm"))
	kernel := weights(l.saved())
	var hist []struct {
		ID  int64  `json:"id"`
		Via string `json:"via"`
	}
	if err := json.Unmarshal([]byte(l.local("history", "--json", "--limit", "5000")), &hist); err != nil {
		t.Fatal(err)
	}
	inHistory := map[int64]string{}
	for _, h := range hist {
		inHistory[h.ID] = h.Via
	}
	total, afterTerm := 0, 0
	for i, w := range ws {
		key := fmt.Sprintf("198.18.0.100:80 198.18.0.%d:80", 11+i)
		t.Logf("writer %d: %d writes answered (last weight %d), stopped at weight %d by: %s; stored %d, kernel %d",
			i+1, len(w.revs), w.acked, w.attempted, w.stopErr, stored[key], kernel[key])
		total += len(w.revs)
		if w.lastAck.After(sigterm) {
			afterTerm++
		}
		for _, rev := range w.revs {
			if via, ok := inHistory[rev]; !ok || via != "api" {
				t.Errorf("writer %d: revision %d was answered 200 but history has it %v (via %q)", i+1, rev, ok, via)
			}
		}
		if stored[key] < w.acked || stored[key] > w.attempted {
			t.Errorf("writer %d: stored weight %d, want the last answered (%d) or the one in flight (%d)", i+1, stored[key], w.acked, w.attempted)
		}
	}
	if fmt.Sprint(kernel) != fmt.Sprint(stored) {
		t.Fatalf("after SIGTERM the kernel is not what is stored (half-applied):\nkernel %v\nstored %v", kernel, stored)
	}
	if out := l.local("diff"); strings.TrimSpace(out) != "# kernel matches the desired state" {
		t.Fatalf("after SIGTERM, diff still has changes:\n%s", out)
	}
	t.Logf("%d writes answered 200 (%d writers had an answer arrive after SIGTERM was sent), all in the history and the kernel", total, afterTerm)

	// A reboot's worth of loss: the kernel is wiped, serve starts again.
	before := l.saved()
	l.ns(l.dir, "ipvsadm -C")
	l.serve(nil, "--listen", apiAddr)
	waitFor(t, "serve to restore the table", 30*time.Second, func() bool { return l.saved() == before })
	// Without --metrics-listen, /metrics is on the API's listener, for a viewer's token.
	if code, _, _ := nsClient(l.cli, "http://"+apiAddr, "").call("GET", "/metrics", ""); code != 401 {
		t.Errorf("/metrics without a token: %d, want 401", code)
	}
	nsClient(l.cli, "http://"+apiAddr, tok).must(t, "GET", "/metrics", "", nil)
	var diff struct {
		Changes []string `json:"changes"`
	}
	nsClient(l.cli, "http://"+apiAddr, tok).must(t, "GET", "/api/v1/diff", "", &diff)
	if len(diff.Changes) != 0 {
		t.Fatalf("after restart, GET /diff: %v", diff.Changes)
	}
}

// local runs the CLI in the director's namespace against the lab's database
// (through the daemon's socket when one runs).
func (l *lab) local(args ...string) string {
	l.t.Helper()
	out, err := l.ipvsctlIn(l.dir, "", nil, args...)
	if err != nil {
		l.t.Fatalf("ipvsctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// With the daemon running, the local CLI's writes go through its socket and
// the daemon writes the kernel: a CLI run from another network namespace
// changes the director's table (the daemon's), never its own namespace's,
// and does not wait for the kernel lock the daemon holds.
func TestServeLocalCLIGoesThroughSocket(t *testing.T) {
	l := newLab(t, 1, false)
	l.serve(nil, "--listen=")
	l.local("vs", "add", "web", "--address", vip, "--port", "80", "--interface", "eth0")
	l.local("rs", "add", "web", "--name", "rs1", "--address", "198.18.0.11")
	if got := l.saved(); !strings.Contains(got, "-a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 1\n") {
		t.Fatalf("after local vs add + rs add, ipvsadm -Sn:\n%s", got)
	}
	start := time.Now()
	if out, err := l.ipvsctlIn(l.cli, "", nil, "rs", "set", "web", "rs1", "--weight", "4"); err != nil {
		t.Fatalf("rs set from the client namespace: %v\n%s", err, out)
	}
	took := time.Since(start)
	if got := l.saved(); !strings.Contains(got, "-r 198.18.0.11:80 -g -w 4\n") {
		t.Fatalf("rs set run in another namespace did not reach the director's kernel:\n%s", got)
	}
	if got := l.ns(l.cli, "ipvsadm -Sn"); got != "" {
		t.Fatalf("rs set wrote the kernel of its own namespace (it reconciled in-process):\n%s", got)
	}
	if took > 25*time.Second {
		t.Errorf("rs set took %s: it waited for the daemon's kernel lock", took)
	}
	var audit []struct {
		Actor, Via, Action, Target, Outcome string
		Revision                            *int64
	}
	if err := json.Unmarshal([]byte(l.local("audit", "--json", "--limit", "1")), &audit); err != nil || len(audit) != 1 {
		t.Fatalf("audit: %v %+v", err, audit)
	}
	if a := audit[0]; a.Via != "cli" || a.Action != "rs set" || a.Target != "web rs1" || a.Outcome != "success" || a.Revision == nil || *a.Revision != 3 {
		t.Fatalf("audit of rs set: %+v", a)
	}
	t.Logf("rs set through the socket took %s; audit: %+v", took, audit[0])
}

// Serve on a kernel whose ip_vs is not loaded (and cannot be, PATH has no
// modprobe) keeps serving: the desired state is stored and shown, the
// kernel reported unavailable with the reason; once ip_vs is loaded, the
// daemon finds it and puts the stored state in. scripts/vmtest.sh runs this
// before anything loads ip_vs.
func TestServeWithoutIPVSModule(t *testing.T) {
	if _, err := os.Stat("/proc/net/ip_vs"); err == nil {
		testenv.Need(t, "ip_vs is already loaded; scripts/vmtest.sh runs this test first in a fresh VM")
	}
	l := newLab(t, 1, false)
	d := l.serve([]string{"PATH=/nonexistent"}, "--listen=")
	api := socketClient(l.db)
	if b := api.must(t, "GET", "/healthz", "", nil); string(b) != "ok (kernel IPVS unavailable)\n" {
		t.Errorf("healthz: %q", b)
	}
	var st struct {
		Kernel struct {
			Available bool   `json:"available"`
			Error     string `json:"error"`
		} `json:"kernel"`
		Revision int64 `json:"revision"`
	}
	api.must(t, "GET", "/api/v1/status", "", &st)
	if st.Kernel.Available || !strings.Contains(st.Kernel.Error, "not available") {
		t.Fatalf("status without ip_vs: %+v", st.Kernel)
	}
	var wr writeResult
	api.must(t, "POST", "/api/v1/services", fmt.Sprintf(`{"name":"web","address":"%s","port":80,"interface":"eth0","scheduler":"rr","servers":[{"address":"198.18.0.11"}]}`, vip), &wr)
	if !wr.Changed || wr.Applied || wr.Revision != 1 || len(wr.Failures) != 1 || !strings.Contains(wr.Failures[0].Err, "not available") {
		t.Fatalf("write without ip_vs: %+v", wr)
	}
	var doc struct {
		Services []struct{ Name string } `json:"services"`
	}
	api.must(t, "GET", "/api/v1/state", "", &doc)
	if len(doc.Services) != 1 || doc.Services[0].Name != "web" {
		t.Fatalf("stored state: %+v", doc)
	}
	if out := l.local("vs", "list"); !strings.Contains(out, "web") {
		t.Fatalf("vs list through the daemon:\n%s", out)
	}
	if _, err := os.Stat("/proc/net/ip_vs"); err == nil {
		t.Fatal("something loaded ip_vs")
	}
	select {
	case err := <-d.done:
		t.Fatalf("serve exited without ip_vs: %v", err)
	default:
	}
	t.Logf("without ip_vs: status says %q; the write stored revision %d and reported %+v", st.Kernel.Error, wr.Revision, wr.Failures)
	// ip_vs arrives (an operator runs modprobe): the daemon's retry finds it.
	run(t, "modprobe", "ip_vs")
	want := "-A -t 198.18.0.100:80 -s rr\n-a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 1\n"
	waitFor(t, "the daemon to find ip_vs and put the stored state in", 30*time.Second, func() bool { return l.saved() == want })
	waitFor(t, "status to say the kernel is available", 10*time.Second, func() bool {
		api.must(t, "GET", "/api/v1/status", "", &st)
		return st.Kernel.Available
	})
}
