//go:build vmtest

package vmtest

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pairDoc is the pair's shared desired state: a DR web service and a DR echo
// service on the VIP over the real servers, and settings.redundancy.
func pairDoc(interval float64, preempt bool, preemptDelay float64, syncd bool, w1 int) string {
	servers := fmt.Sprintf(`{"name":"rs1","address":"198.18.0.11","weight":%d},{"name":"rs2","address":"198.18.0.12","weight":1}`, w1)
	return fmt.Sprintf(`{"settings":{"network":"dr","redundancy":{"vrid":51,"interface":"eth0","advert_interval":%v,
	"preempt":%v,"preempt_delay":%v,"sync_daemon":%v}},"services":[
	{"name":"web","protocol":"tcp","address":"%s","port":80,"interface":"eth0","scheduler":"rr","servers":[%s]},
	{"name":"echo","protocol":"tcp","address":"%s","port":%d,"interface":"eth0","scheduler":"rr","servers":[%s]}]}`,
		interval, preempt, preemptDelay, syncd, vip, servers, vip, echoPort, servers)
}

// roleOf is the role `ipvsctl node show` reports ("" when it reports none).
func roleOf(l *lab) string {
	out, err := l.ipvsctl("node", "show")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "redundancy:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				return f[0]
			}
		}
	}
	return ""
}

func conns(t *testing.T, l *lab) string {
	out, _ := exec.Command("ip", "netns", "exec", l.dir, "ipvsadm", "-Lnc").CombinedOutput()
	return string(out)
}

// TestRedundancyPairFailover: two `ipvsctl serve` directors (priorities 200
// and 100, each the other's replication peer) carry a DR VIP. A is master with
// the VIP, B backup without it; a change made on A is on B within a second; a
// long-lived TCP connection through the VIP survives A's SIGKILL and cut link
// (B has its entry from the sync daemon); new connections go through B; A
// restarted removes the VIP its ledger says it added before it speaks VRRP and
// preempts back; with preempt off, a restarted A stays backup.
func TestRedundancyPairFailover(t *testing.T) {
	p := newPair(t, 2)
	A, B := p.a, p.b
	p.nodes(200, 100)
	dA, dB := p.director(A, addrA), p.director(B, addrB)
	dA.start()
	dB.start()
	const interval = 1.0
	A.apply(pairDoc(interval, true, 2, true, 1))

	waitFor(t, "A master with the VIP, B backup without it", 30*time.Second, func() bool {
		return roleOf(A) == "master" && hasVIP(t, A) && roleOf(B) == "backup" && !hasVIP(t, B)
	})
	show := B.cmdOut("node", "show")
	status := B.cmdOut("status")
	if !strings.Contains(show, "backup of VRID 51") || !strings.Contains(status, "Redundancy: backup of VRID 51") {
		t.Errorf("B's node show / status do not say backup:\n%s\n%s", show, status)
	}
	t.Logf("B node show:\n%s", show)
	waitFor(t, "B's IPVS table from replication", 10*time.Second, func() bool {
		return strings.Contains(B.saved(), "-a -t "+vip+":80 -r 198.18.0.11:80 -g -w 1")
	})

	// A change made on A reaches B.
	A.apply(pairDoc(interval, true, 2, true, 3))
	changed := time.Now()
	want := A.cmdOut("export")
	var took time.Duration
	waitFor(t, "A's change on B", 10*time.Second, func() bool {
		if B.cmdOut("export") == want {
			took = time.Since(changed)
			return true
		}
		return false
	})
	// B's own measure: from the revision's time on A to its copy stored on B
	// (the export above costs a few hundred ms an exec under emulation).
	var view struct {
		Redundancy struct {
			Replication struct {
				LastCopySeconds float64 `json:"last_copy_seconds"`
				PeerRevision    int64   `json:"peer_revision"`
			} `json:"replication"`
		} `json:"redundancy"`
	}
	if err := json.Unmarshal([]byte(B.cmdOut("node", "show", "--json")), &view); err != nil {
		t.Fatal(err)
	}
	lag := view.Redundancy.Replication.LastCopySeconds
	t.Logf("a change made on A: stored on B %.3fs after A made it (B's replication status); B's export equal %s after A's apply returned",
		lag, took.Round(time.Millisecond))
	if lag <= 0 || lag > 1 {
		t.Errorf("a change made on A reached B after %.3fs, want under a second", lag)
	}
	if h := B.cmdOut("history"); !strings.Contains(h, "replication from") {
		t.Errorf("B's history shows no replicated revision:\n%s", h)
	}
	waitFor(t, "B's table at the new weight", 5*time.Second, func() bool {
		return strings.Contains(B.saved(), "-r 198.18.0.11:80 -g -w 3")
	})
	if _, err := B.ipvsctl("rs", "drain", "web", "rs1"); err == nil {
		t.Errorf("an edit on the backup was accepted")
	}

	// A long-lived connection through the VIP, synced to B.
	h := A.hold(fmt.Sprintf("%s:%d", vip, echoPort))
	defer h.close()
	local := h.c.LocalAddr().String()
	waitFor(t, "the connection's entry on B (sync daemon)", 15*time.Second, func() bool {
		return strings.Contains(conns(t, B), local)
	})
	t.Logf("B's connection table before the failover:\n%s", conns(t, B))
	echoedBefore, _, err := h.state()
	if err != nil || echoedBefore == 0 {
		t.Fatalf("the long-lived connection before the failover: %d echoes, %v", echoedBefore, err)
	}

	// A dies: SIGKILL and its link cut.
	killed := time.Now()
	dA.stop(syscall.SIGKILL)
	p.link(A, false)
	var tookOver time.Duration
	waitFor(t, "B master with the VIP", 30*time.Second, func() bool {
		if hasVIP(t, B) {
			tookOver = time.Since(killed)
			return true
		}
		return false
	})
	t.Logf("A killed -> the VIP on B in %s (advert interval %vs)", tookOver.Round(time.Millisecond), interval)
	waitFor(t, "the long-lived connection echoing through B", 40*time.Second, func() bool {
		n, _, err := h.state()
		return err != nil || n >= echoedBefore+int(tookOver/(100*time.Millisecond))+20
	})
	n, gap, err := h.state()
	if err != nil {
		t.Fatalf("the long-lived connection did not survive the failover: %v\nB's connections:\n%s", err, conns(t, B))
	}
	t.Logf("the long-lived connection survived: %d lines echoed by %s, longest gap %s", n, h.server, gap.Round(time.Millisecond))
	if c := conns(t, B); !strings.Contains(c, local) {
		t.Errorf("B has no entry for %s:\n%s", local, c)
	}
	waitFor(t, "new connections through B", 20*time.Second, func() bool {
		c, err := A.dial(vip + ":80")
		if err != nil {
			return false
		}
		defer c.Close()
		_, err = ask(c)
		return err == nil
	})
	if got := A.get(vip+":80", 4); got["rs1"]+got["rs2"] != 4 {
		t.Errorf("new connections after the takeover: %v", got)
	}
	if r := roleOf(B); r != "master" {
		t.Errorf("B's node show says %q after the takeover", r)
	}

	// A comes back: its leftover VIP (the SIGKILL left it) goes before it speaks VRRP; it preempts after 2 s.
	if !hasVIP(t, A) {
		t.Errorf("A's VIP was gone before its daemon restarted (SIGKILL should leave it)")
	}
	p.link(A, true)
	restarted := time.Now()
	dA.start()
	waitFor(t, "A's leftover VIP removed", 10*time.Second, func() bool { return !hasVIP(t, A) })
	if r := roleOf(A); r == "master" || !hasVIP(t, B) {
		t.Errorf("when A's leftover VIP went, A was %q and B held the VIP: %v", r, hasVIP(t, B))
	}
	t.Logf("A restarted: leftover VIP removed %s after the start", time.Since(restarted).Round(time.Millisecond))
	waitFor(t, "A master again (preempt), B backup without the VIP", 30*time.Second, func() bool {
		return roleOf(A) == "master" && hasVIP(t, A) && roleOf(B) == "backup" && !hasVIP(t, B)
	})
	t.Logf("A restarted -> master again in %s (preempt_delay 2 s)", time.Since(restarted).Round(time.Millisecond))
	time.Sleep(3 * time.Second)
	if n2, gap, err := h.state(); err != nil || n2 <= n {
		t.Logf("the long-lived connection after A preempted back: %d echoes, %v (B's master daemon may not have resent it to A)", n2, err)
	} else {
		t.Logf("the long-lived connection also survived the preemption back: %d echoes, longest gap %s", n2, gap.Round(time.Millisecond))
	}
	h.close()

	// Preempt off (changed on the master, A): a restarted A stays backup.
	A.apply(pairDoc(interval, false, 0, true, 3))
	want = A.cmdOut("export")
	waitFor(t, "preempt off on B", 10*time.Second, func() bool { return B.cmdOut("export") == want })
	dA.stop(syscall.SIGKILL)
	p.link(A, false)
	waitFor(t, "B master with the VIP", 30*time.Second, func() bool { return roleOf(B) == "master" && hasVIP(t, B) })
	p.link(A, true)
	dA.start()
	waitFor(t, "A's leftover VIP removed", 10*time.Second, func() bool { return !hasVIP(t, A) })
	waitFor(t, "A backup", 20*time.Second, func() bool { return roleOf(A) == "backup" })
	time.Sleep(time.Duration(4*interval) * time.Second)
	if roleOf(A) != "backup" || hasVIP(t, A) || roleOf(B) != "master" || !hasVIP(t, B) {
		t.Errorf("with preempt off, A restarted: A %s (VIP %v), B %s (VIP %v)", roleOf(A), hasVIP(t, A), roleOf(B), hasVIP(t, B))
	}
	if got := A.get(vip+":80", 2); got["rs1"]+got["rs2"] != 2 {
		t.Errorf("requests through B with A back as backup: %v", got)
	}
}

// TestRedundancyKeepalivedPeer: an ipvsctl director and a keepalived one
// (vrrp_version 3, the same VRID and VIP; its LVS DR table loaded with
// ipvsadm) as one pair, both ways round: the priority-200 one is master
// with the VIP, serving HTTP through it; killed (SIGKILL, link cut) the
// other takes the VIP and serves; restarted, it preempts back. ipvsctl's
// notify_master, notify_backup and notify run once at each of its changes,
// in order (keepalived's initial BACKUP first).
func TestRedundancyKeepalivedPeer(t *testing.T) {
	for _, ipvsctlMaster := range []bool{true, false} {
		name := map[bool]string{true: "ipvsctl master, keepalived backup", false: "keepalived master, ipvsctl backup"}[ipvsctlMaster]
		t.Run(name, func(t *testing.T) {
			p := newPair(t, 2)
			A, B := p.a, p.b // A has priority 200
			ipv, ka := A, B
			ipvPrio, kaPrio := 200, 100
			if !ipvsctlMaster {
				ipv, ka, ipvPrio, kaPrio = B, A, 100, 200
			}
			ipv.cmdOut("node", "set", "--priority", fmt.Sprint(ipvPrio))
			d := p.director(ipv, map[bool]string{true: addrA, false: addrB}[ipvsctlMaster])
			// ipvsctl's notify programs (TestNotifyPairFailover's script):
			// keepalived's initial BACKUP, then each change of role, once.
			notifyLog := filepath.Join(t.TempDir(), "notify.log")
			d.env = []string{notifyLogEnv + "=" + notifyLog}
			d.start()
			script := notifyScript(t)
			ipvDoc := withDoc(t, pairDoc(1, true, 0, false, 1), func(m map[string]any) {
				for k, v := range vrrpNotify(script) {
					m["settings"].(map[string]any)["redundancy"].(map[string]any)[k] = v
				}
			})
			var ran []string
			ranNext := func(what string, states ...string) {
				t.Helper()
				for _, s := range states {
					ran = append(ran, strings.ToLower(s), fmt.Sprintf("notify INSTANCE VI_1 %s %d", s, ipvPrio))
				}
				waitFor(t, what+": ipvsctl's notify programs", 20*time.Second, func() bool {
					return len(notifyLines(notifyLog, vrrpWords...)) >= len(ran)
				})
				time.Sleep(2 * time.Second) // two advert intervals: a program run twice would be in the log by now
				if got := notifyLines(notifyLog, vrrpWords...); !slices.Equal(got, ran) {
					t.Errorf("%s: ipvsctl's notify programs ran:\n  %s\nwant:\n  %s", what, strings.Join(got, "\n  "), strings.Join(ran, "\n  "))
				}
			}
			for _, port := range []string{"80", fmt.Sprint(echoPort)} {
				ka.ns(ka.dir, "ipvsadm -A -t "+vip+":"+port+" -s rr")
				ka.ns(ka.dir, "ipvsadm -a -t "+vip+":"+port+" -r 198.18.0.11:"+port+" -g -w 1")
				ka.ns(ka.dir, "ipvsadm -a -t "+vip+":"+port+" -r 198.18.0.12:"+port+" -g -w 1")
			}
			k := &kaDirector{l: ka, prio: kaPrio, interval: 1}
			t.Cleanup(k.kill)
			k.startA()
			if !ipvsctlMaster {
				// keepalived master before ipvsctl speaks VRRP: otherwise ipvsctl
				// may be master first, alone, and give way (backup, master, backup).
				waitFor(t, "keepalived master with the VIP", 30*time.Second, func() bool { return hasVIP(t, ka) })
			}
			ipv.apply(ipvDoc)
			start := func() {
				if ipvsctlMaster {
					d.start()
				} else {
					k.startA()
				}
			}
			kill := func() {
				if ipvsctlMaster {
					d.stop(syscall.SIGKILL)
				} else {
					k.kill()
				}
			}
			serves := func(what string) {
				t.Helper()
				waitFor(t, what+": HTTP through the VIP", 20*time.Second, func() bool {
					c, err := A.dial(vip + ":80")
					if err != nil {
						return false
					}
					defer c.Close()
					_, err = ask(c)
					return err == nil
				})
			}
			settled := func(what string) {
				t.Helper()
				waitFor(t, what, 30*time.Second, func() bool {
					r := roleOf(ipv)
					return hasVIP(t, A) && !hasVIP(t, B) && (ipvsctlMaster && r == "master" || !ipvsctlMaster && r == "backup")
				})
				serves(what)
			}
			settled("A (priority 200) master with the VIP, B backup without it")
			if ipvsctlMaster {
				ranNext("ipvsctl master", "BACKUP", "MASTER")
			} else {
				ranNext("ipvsctl backup", "BACKUP")
			}
			t.Logf("ipvsctl's node show:\n%s", ipv.cmdOut("node", "show"))

			killed := time.Now()
			p.link(A, false)
			kill()
			waitFor(t, "B master with the VIP", 30*time.Second, func() bool {
				return hasVIP(t, B) && (ipvsctlMaster || roleOf(ipv) == "master")
			})
			serves("B after the takeover")
			if !ipvsctlMaster {
				ranNext("keepalived killed: ipvsctl took over", "MASTER")
			}
			t.Logf("A killed -> B serving through the VIP in %s", time.Since(killed).Round(time.Millisecond))

			p.link(A, true)
			start()
			settled("A restarted: master again (preempt), B backup without the VIP")
			if ipvsctlMaster {
				ranNext("ipvsctl restarted after its SIGKILL (which ran nothing): preempted back", "BACKUP", "MASTER")
			} else {
				ranNext("keepalived restarted: ipvsctl gave back", "BACKUP")
			}
			if ipvsctlMaster {
				if !strings.Contains(ipv.cmdOut("node", "show"), "preempting a master of lower priority 100") {
					t.Errorf("ipvsctl's transitions lack the preemption:\n%s", ipv.cmdOut("node", "show"))
				}
			}
		})
	}
}
