//go:build vmtest

package vmtest

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFaultTakeoverKilledAtEachStep: a pair of ipvsctl directors (A at
// priority 200, B at 100; adverts every 1 s, preempt, the sync daemon on)
// under a long-lived connection and new requests through the DR VIP. For
// each step of a takeover B is started armed to SIGKILL itself there
// (IPVSCTL_FAULT_KILL_AT: after the VIP add, before the ledger write, in
// the sync daemon's switch); A's priority drops to 50, B preempts and dies
// at the step, its VIP left up with no daemon. B restarted unarmed removes
// what its ledger's intent covers before it speaks VRRP, then takes over:
// the VIP ends on the link once (B's), A backup without it, and the
// long-lived connection is never reset. A's priority back at 200 returns
// the VIP to A for the next step.
func TestFaultTakeoverKilledAtEachStep(t *testing.T) {
	p := newPair(t, 2)
	A, B := p.a, p.b
	p.nodes(200, 100)
	dA, dB := p.director(A, addrA), p.director(B, addrB)
	dA.start()
	dB.start()
	A.apply(pairDoc(1.0, true, 0, true, 1))
	settled := func(master, backup *lab) func() bool {
		return func() bool {
			return roleOf(master) == "master" && hasVIP(t, master) && roleOf(backup) == "backup" && !hasVIP(t, backup)
		}
	}
	waitFor(t, "A master with the VIP, B backup without it", 60*time.Second, settled(A, B))
	h := A.hold(fmt.Sprintf("%s:%d", vip, echoPort))
	stop := make(chan struct{})
	results := A.stream(vip+":80", 100*time.Millisecond, 3000, stop)
	stopped := false
	defer func() {
		if !stopped {
			close(stop)
		}
	}()

	var rows []string
	for _, step := range []string{"vip-added", "before-ledger", "sync-switch"} {
		dB.stop(syscall.SIGTERM)
		dB.env = []string{"IPVSCTL_FAULT_KILL_AT=" + step}
		dB.start()
		waitFor(t, step+": armed B backup, A master", 60*time.Second, settled(A, B))
		time.Sleep(2 * time.Second) // B's backup sync daemon has the connection

		A.cmdOut("node", "set", "--priority", "50")
		gave := time.Now()
		select {
		case <-dB.done:
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: B was not killed at the step within 60 s of A's priority drop:\n%s", step, dB.logs.String())
		}
		died := time.Since(gave)
		logs := dB.logs.String()
		if !strings.Contains(logs, "fault injection: SIGKILL at the takeover step") || !strings.Contains(logs, "step="+step) {
			t.Fatalf("%s: B died otherwise than at the step:\n%s", step, logs)
		}
		dB.stop(syscall.SIGKILL) // reaped: its logs kept
		// B's daemon is dead with the VIP up on its link (a SIGKILL removes nothing): A, meanwhile, is master or becomes it.
		bLeft := hasVIP(t, B)
		time.Sleep(time.Second)
		both := hasVIP(t, A) && hasVIP(t, B)

		dB.env = nil
		restarted := time.Now()
		dB.start()
		var converged time.Duration
		waitFor(t, step+": restarted B master with the VIP, A backup without it", 60*time.Second, func() bool {
			if settled(B, A)() {
				converged = time.Since(restarted)
				return true
			}
			return false
		})
		time.Sleep(2 * time.Second)
		if !settled(B, A)() {
			t.Errorf("%s: after converging: A %s (VIP %v), B %s (VIP %v)", step, roleOf(A), hasVIP(t, A), roleOf(B), hasVIP(t, B))
		}
		if n := A.vipCount() + B.vipCount(); n != 1 {
			t.Errorf("%s: the VIP is on the link %d times after B's restart", step, n)
		}
		if _, _, err := h.state(); err != nil {
			t.Fatalf("%s: the long-lived connection: %v", step, err)
		}
		rows = append(rows, fmt.Sprintf("%s: killed %s after A gave way, its VIP left up %v (both holding it %v), converged %s after the restart",
			step, died.Round(10*time.Millisecond), bLeft, both, converged.Round(10*time.Millisecond)))
		t.Log(rows[len(rows)-1])

		A.cmdOut("node", "set", "--priority", "200")
		waitFor(t, step+": A master again, B backup", 60*time.Second, settled(A, B))
	}
	close(stop)
	stopped = true
	failed, total := 0, 0
	for _, r := range results() {
		total++
		if r.err != nil {
			failed++
		}
	}
	echoed, gap, err := h.state()
	h.close()
	if err != nil || echoed == 0 {
		t.Errorf("the long-lived connection: %d echoed, %v", echoed, err)
	}
	t.Logf("the long-lived connection: %d lines, longest gap %s; %d of %d new requests failed", echoed, gap.Round(time.Millisecond), failed, total)
	faultRow(t, "daemon SIGKILLed at each takeover step (after the VIP add / before the ledger write / in the sync daemon's switch), pair, sync daemon",
		fmt.Sprintf("the long-lived connection (%d lines, longest gap %s), %d/%d new requests; the VIP once on the link after each restart (%s)",
			echoed, gap.Round(10*time.Millisecond), total-failed, total, strings.Join(rows, "; ")),
		lostOf(failed)+" (while the dead director held the VIP, and in the takeovers)", 0)
}
