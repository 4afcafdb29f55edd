//go:build vmtest

package vmtest

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// failbackConns is how many long-lived connections the failback test holds.
const failbackConns = 100

// lastTransition is the director's last change of role, as node show --json
// reports it.
func lastTransition(t *testing.T, l *lab) (to, reason string) {
	var v struct {
		Redundancy struct {
			Transitions []struct{ To, Reason string } `json:"transitions"`
		} `json:"redundancy"`
	}
	if err := json.Unmarshal([]byte(l.cmdOut("node", "show", "--json")), &v); err != nil {
		t.Fatal(err)
	}
	tr := v.Redundancy.Transitions
	if len(tr) == 0 {
		return "", ""
	}
	return tr[len(tr)-1].To, tr[len(tr)-1].Reason
}

// TestFailbackKeepsConnections: A (priority 200) dies and B carries the VIP;
// 100 long-lived connections are opened through B; A comes back and, with
// the sync daemon and preemption (no preempt delay), waits before it
// preempts until its backup sync daemon has B's active connections: after
// the preemption every connection still answers, through A. Without the
// wait A would take the VIP while its table lacks most of them (the kernel
// syncs an established connection to a new backup only at its next sync
// point, 50 packets apart), and those would be reset.
func TestFailbackKeepsConnections(t *testing.T) {
	p := newPair(t, 2)
	A, B := p.a, p.b
	p.nodes(200, 100)
	dA, dB := p.director(A, addrA), p.director(B, addrB)
	dA.start()
	dB.start()
	A.apply(pairDoc(1, true, 0, true, 1))
	waitFor(t, "A master with the VIP, B backup with its table", 30*time.Second, func() bool {
		return roleOf(A) == "master" && hasVIP(t, A) && roleOf(B) == "backup" &&
			strings.Contains(B.saved(), fmt.Sprintf("-a -t %s:%d -r 198.18.0.11:%d -g", vip, echoPort, echoPort))
	})

	dA.stop(syscall.SIGKILL)
	p.link(A, false)
	waitFor(t, "B master with the VIP", 30*time.Second, func() bool { return roleOf(B) == "master" && hasVIP(t, B) })

	var hs []*holder
	defer func() {
		for _, h := range hs {
			h.close()
		}
	}()
	for range failbackConns {
		hs = append(hs, A.holdEvery(fmt.Sprintf("%s:%d", vip, echoPort), 250*time.Millisecond))
	}
	echoed := func() (min int, broken []string) {
		min = -1
		for i, h := range hs {
			n, _, err := h.state()
			if err != nil {
				broken = append(broken, fmt.Sprintf("connection %d: %v", i+1, err))
			}
			if min < 0 || n < min {
				min = n
			}
		}
		return min, broken
	}
	waitFor(t, "every connection echoing through B", 30*time.Second, func() bool { n, _ := echoed(); return n >= 3 })
	if _, broken := echoed(); len(broken) > 0 {
		t.Fatalf("connections through B broke before A came back:\n%s", strings.Join(broken, "\n"))
	}
	t.Logf("B's table before A comes back:\n%s", B.cmdOut("status"))

	p.link(A, true)
	back := time.Now()
	dA.start()
	waitFor(t, "A master again with the VIP, B backup without it", 60*time.Second, func() bool {
		return roleOf(A) == "master" && hasVIP(t, A) && roleOf(B) == "backup" && !hasVIP(t, B)
	})
	to, reason := lastTransition(t, A)
	t.Logf("A back -> master in %s: %s", time.Since(back).Round(time.Millisecond), reason)
	if to != "master" || !strings.Contains(reason, "preempting a master of lower priority 100 after waiting") ||
		!strings.Contains(reason, "for the sync daemon") {
		t.Errorf("A's preemption did not wait for its sync daemon: to %s, %q", to, reason)
	}
	if logs := dA.logs.String(); !strings.Contains(logs, "a preemption waits for the sync daemon") {
		t.Errorf("A's log does not say what its preemption waited for")
	}

	// Every connection answers through A for 4 s more (16 lines each).
	base, _ := echoed()
	waitFor(t, "every connection echoing through A", 40*time.Second, func() bool {
		n, broken := echoed()
		return len(broken) > 0 || n >= base+16
	})
	if n, broken := echoed(); len(broken) > 0 {
		t.Errorf("%d of %d connections broke at the preemption (the fewest echoes: %d):\n%s\nA's connections:\n%s",
			len(broken), failbackConns, n, strings.Join(broken, "\n"), conns(t, A))
	}
}
