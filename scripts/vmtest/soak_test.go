//go:build vmtest

package vmtest

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
)

// soakDoc is pairDoc with an HTTP check (every 1 s, quiesce) on the web
// service, and rs1 at weight w1.
func soakDoc(w1 int) string {
	doc := pairDoc(1.0, true, 0, true, w1)
	return strings.Replace(doc, `"port":80,"interface":"eth0","scheduler":"rr",`,
		`"port":80,"interface":"eth0","scheduler":"rr","check":{"type":"http","path":"/","port":8080,"interval":1,"timeout":0.9,"rise":1,"fall":2,"on_failure":"quiesce"},`, 1)
}

// procUsage is a process's resident memory (KB) and open file descriptors.
func procUsage(t *testing.T, pid int) (rssKB, fds int) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("daemon %d: %v", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			rssKB, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatalf("daemon %d: %v", pid, err)
	}
	return rssKB, len(ents)
}

// revisionsReadable reads every stored revision of the director back
// (`ipvsctl history REV`: its document rebuilt from the reverse deltas and
// compared with the one before) and says how many there were.
func revisionsReadable(t *testing.T, l *lab) int {
	t.Helper()
	var revs []struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal([]byte(l.cmdOut("history", "--limit", "100000", "--json")), &revs); err != nil {
		t.Fatalf("%s: history --json: %v", l.dir, err)
	}
	for _, r := range revs {
		if out, err := l.ipvsctl("history", strconv.FormatInt(r.ID, 10)); err != nil {
			t.Errorf("%s: revision %d unreadable: %v\n%s", l.dir, r.ID, err, out)
		}
	}
	return len(revs)
}

// TestSoak (scripts/soak.sh; IPVSCTL_SOAK_DURATION, 5m in CI): a pair of
// ipvsctl directors (A master at 200, B at 100, the sync daemon on, HTTP
// checks on the web service) under two long-lived connections through the
// VIP and a stream of new requests, while, in turn until the time is up: an
// edit on A (rs1's weight, replicated to B), a health flap (rs1's check port
// refuses for 4 s: quiesced, then back), a failover and back (A's priority
// to 50, B preempts; back to 200), a restart of the master's daemon (A's
// priority to 50, B preempts, B's daemon stopped: A takes over, B restarted:
// B preempts A once its sync daemon has A's connections; A back to 200),
// and a restart of B as backup (SIGTERM, then SIGKILL the next time). At the end: every revision stored on either director is
// readable, each kernel equals its desired state with its overlays (`ipvsctl
// diff` empty on both), the long-lived connections were never reset (edits
// are in place, quiesce keeps connections, failovers carry them in the sync
// daemon), and A's daemon's memory and file descriptors are flat.
func TestSoak(t *testing.T) {
	v := os.Getenv("IPVSCTL_SOAK_DURATION")
	if v == "" {
		testenv.OptIn(t, "the soak runs from scripts/soak.sh (IPVSCTL_SOAK_DURATION)")
	}
	dur, err := time.ParseDuration(v)
	if err != nil || dur < time.Minute {
		t.Fatalf("IPVSCTL_SOAK_DURATION %q: want a duration of a minute or more", v)
	}
	p := newPair(t, 2)
	A, B := p.a, p.b
	p.nodes(200, 100)
	dA, dB := p.director(A, addrA), p.director(B, addrB)
	dA.start()
	dB.start()
	A.apply(soakDoc(1))
	settled := func(master, backup *lab) func() bool {
		return func() bool {
			return roleOf(master) == "master" && hasVIP(t, master) && roleOf(backup) == "backup" && !hasVIP(t, backup)
		}
	}
	waitFor(t, "A master, B backup", 60*time.Second, settled(A, B))
	web := vip + ":80"
	waitFor(t, "both web servers up", 60*time.Second, func() bool { return A.weightsOf(web)["198.18.0.11:80"] == 1 })
	held := []*holder{A.hold(fmt.Sprintf("%s:%d", vip, echoPort)), A.hold(fmt.Sprintf("%s:%d", vip, echoPort))}
	stop := make(chan struct{})
	results := A.stream(web, 200*time.Millisecond, int(dur/(200*time.Millisecond))+300, stop)
	stopped := false
	defer func() {
		if !stopped {
			close(stop)
		}
	}()
	time.Sleep(5 * time.Second) // warmed up: the first sample
	pid := dA.cmd.Process.Pid
	rss0, fds0 := procUsage(t, pid)
	samples := []string{fmt.Sprintf("%d KB/%d fds", rss0, fds0)}

	start := time.Now()
	done := map[string]int{}
	weight := 1
	actions := []func(){
		func() { // an edit on the master, replicated
			weight = weight%5 + 1
			A.apply(soakDoc(weight))
			want := fmt.Sprintf("-r 198.18.0.11:%d -g -w %d", echoPort, weight)
			waitFor(t, "the edit on B's kernel", 30*time.Second, func() bool { return strings.Contains(B.saved(), want) })
			done["edits"]++
		},
		func() { // rs1's check fails for 4 s
			A.ns(p.net.rs[0], "iptables -A INPUT -p tcp --dport 8080 -j REJECT --reject-with tcp-reset")
			waitFor(t, "rs1 quiesced", 30*time.Second, func() bool { return A.weightsOf(web)["198.18.0.11:80"] == 0 })
			time.Sleep(4 * time.Second)
			A.ns(p.net.rs[0], "iptables -D INPUT -p tcp --dport 8080 -j REJECT --reject-with tcp-reset")
			waitFor(t, "rs1 back", 30*time.Second, func() bool { return A.weightsOf(web)["198.18.0.11:80"] > 0 })
			done["health flaps"]++
		},
		func() { // a failover and back
			A.cmdOut("node", "set", "--priority", "50")
			waitFor(t, "B master after A gave way", 60*time.Second, settled(B, A))
			time.Sleep(3 * time.Second)
			A.cmdOut("node", "set", "--priority", "200")
			waitFor(t, "A master again", 60*time.Second, settled(A, B))
			done["failovers"]++
		},
		func() { // the master's daemon restarted: B, made master, stopped and back; it preempts A again once its sync daemon caught up
			A.cmdOut("node", "set", "--priority", "50")
			waitFor(t, "B master after A gave way", 60*time.Second, settled(B, A))
			dB.stop(syscall.SIGTERM)
			waitFor(t, "A master while B's daemon is down", 60*time.Second, func() bool { return roleOf(A) == "master" && hasVIP(t, A) })
			dB.start()
			waitFor(t, "B master again (failback)", 90*time.Second, settled(B, A))
			A.cmdOut("node", "set", "--priority", "200")
			waitFor(t, "A master again", 60*time.Second, settled(A, B))
			done["master restarts"]++
		},
		func() { // the backup's daemon restarted
			sig := syscall.SIGTERM
			if done["restarts"]%2 == 1 {
				sig = syscall.SIGKILL
			}
			dB.stop(sig)
			dB.start()
			waitFor(t, "B backup again", 60*time.Second, settled(A, B))
			done["restarts"]++
		},
	}
	for i := 0; time.Since(start) < dur; i++ {
		actions[i%len(actions)]()
		time.Sleep(2 * time.Second)
		if i%len(actions) == len(actions)-1 {
			rss, fds := procUsage(t, pid)
			samples = append(samples, fmt.Sprintf("%d KB/%d fds", rss, fds))
		}
		for j, h := range held {
			if _, _, err := h.state(); err != nil {
				t.Fatalf("long-lived connection %d after %s: %v", j+1, time.Since(start).Round(time.Second), err)
			}
		}
	}
	soaked := time.Since(start)
	close(stop)
	stopped = true
	time.Sleep(3 * time.Second) // a reconcile or two after the last action
	rss1, fds1 := procUsage(t, pid)
	samples = append(samples, fmt.Sprintf("%d KB/%d fds", rss1, fds1))

	var lines []string
	for j, h := range held {
		echoed, gap, err := h.state()
		h.close()
		if err != nil || echoed == 0 {
			t.Errorf("long-lived connection %d: %d echoed, %v", j+1, echoed, err)
		}
		lines = append(lines, fmt.Sprintf("%d lines (longest gap %s)", echoed, gap.Round(10*time.Millisecond)))
	}
	for _, d := range []*lab{A, B} {
		if diff := d.cmdOut("diff"); strings.TrimSpace(diff) != "# kernel matches the desired state" {
			t.Errorf("%s: ipvsctl diff after the soak:\n%s", d.dir, diff)
		}
	}
	revsA, revsB := revisionsReadable(t, A), revisionsReadable(t, B)
	if fds1 > fds0+8 {
		t.Errorf("A's daemon's file descriptors grew from %d to %d (%s)", fds0, fds1, strings.Join(samples, ", "))
	}
	if rss1 > rss0*3/2+16<<10 {
		t.Errorf("A's daemon's memory grew from %d KB to %d KB (%s)", rss0, rss1, strings.Join(samples, ", "))
	}
	failed, total := 0, 0
	for _, r := range results() {
		total++
		if r.err != nil {
			failed++
		}
	}
	t.Logf("soak %s: %v; samples of A's daemon %s; %d of %d new requests failed", soaked.Round(time.Second), done,
		strings.Join(samples, ", "), failed, total)
	faultRow(t, fmt.Sprintf("soak %s (`scripts/soak.sh`): %d edits, %d health flaps, %d failovers and back, %d restarts of the master and %d of the backup, pair, sync daemon",
		soaked.Round(time.Second), done["edits"], done["health flaps"], done["failovers"], done["master restarts"], done["restarts"]),
		fmt.Sprintf("2/2 long-lived (%s); %d/%d new requests; revisions readable (A %d, B %d); both kernels equal their desired state; A's daemon %s to %s",
			strings.Join(lines, ", "), total-failed, total, revsA, revsB, samples[0], samples[len(samples)-1]),
		lostOf(failed)+" (in the failovers)", 0)
}
