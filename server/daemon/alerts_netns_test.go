package daemon

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
	"github.com/ipvsctl/ipvsctl/internal/testmta"
	"github.com/ipvsctl/ipvsctl/server/events"
)

// Tier 2 (root): the daemon mails a real server's down and a VRRP MASTER
// to a real MTA, Debian's OpenSMTPD, run by the test in a network namespace
// of its own (its spool and control socket on tmpfs in a mount namespace
// of its own, its configuration and maildirs in a temporary directory),
// listening only on the namespace's end of a veth pair. The test reads the
// delivered mail from the maildir: keepalived's headers, subject and body.
func TestAlertMailThroughARealMTA(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Need(t, "needs root to create network namespaces")
	}
	for _, tool := range []string{"ip", "unshare", "smtpd"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Needf(t, "needs %s (smtpd: Debian's opensmtpd): %v", tool, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ns := fmt.Sprintf("alerts-mta-%d", os.Getpid())
	host, relay := "198.18.251.2", "198.18.251.1"
	run := func(script string) {
		t.Helper()
		if out, err := exec.CommandContext(ctx, "sh", "-c", script).CombinedOutput(); err != nil {
			t.Fatalf("sh -c %q: %v\n%s", script, err, out)
		}
	}
	veth := fmt.Sprintf("alm%d", os.Getpid()%100000)
	run(fmt.Sprintf(`ip netns add %[1]s && ip -n %[1]s link set lo up &&
		ip link add %[2]sh type veth peer name %[2]sn netns %[1]s &&
		ip addr add %[3]s/30 dev %[2]sh && ip link set %[2]sh up &&
		ip -n %[1]s addr add %[4]s/30 dev %[2]sn && ip -n %[1]s link set %[2]sn up`, ns, veth, host, relay))
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() }) // its end of the veth goes with it, and so the host's

	mta := testmta.Start(t, ns, relay, "example.test", "ops", "noc")

	b := newBackend(t)
	bhost, bport, _ := net.SplitHostPort(b.addr)
	r := newAlertRig(t, ctx, fmt.Sprintf(`{"settings": {
    "redundancy": {"vrid": 51, "interface": "lo", "instance": "VI_WEB"},
    "alerts": {"smtp": {"server": %q, "to": ["ops@example.test", "noc@example.test"], "from": "lb1@example.test",
      "helo_name": "lb1.example.test", "router_id": "LB1", "alert": true, "connect_timeout": 20}}},
  "services": [{"name": "web", "address": "198.18.0.100", "port": 80, "forwarding": "nat",
    "check": {"type": "tcp", "interval": 0.1, "timeout": 0.5, "rise": 1, "fall": 1, "on_failure": "remove"},
    "servers": [{"name": "r1", "address": %q, "port": %s}]}]}`, relay, bhost, bport))
	// The mail in both maildirs, by box and subject. The director's own
	// VRRP instance (on lo) may mail its states too: the test waits for
	// the subjects it makes happen, not for a count.
	read := func() map[string]testmta.Mail {
		got := map[string]testmta.Mail{}
		for _, m := range mta.Mail() {
			got[m.Box+" "+m.Header.Get("Subject")] = m
		}
		return got
	}
	ref := fmt.Sprintf("[%s]:tcp:%s", bhost, bport)
	up := "[LB1] Realserver " + ref + " of virtual server [198.18.0.100]:tcp:80 - UP"
	down := "[LB1] Realserver " + ref + " of virtual server [198.18.0.100]:tcp:80 - DOWN"
	master := "[LB1] VRRP Instance VI_WEB - Entering MASTER state"
	var got map[string]testmta.Mail
	inBoth := func(subject string) func() bool {
		return func() bool {
			got = read()
			_, a := got["ops "+subject]
			_, b := got["noc "+subject]
			return a && b
		}
	}
	waitUntil(t, ctx, "the first pass's mail (UP)", inBoth(up))
	b.close()
	waitUntil(t, ctx, "the down's mail", inBoth(down))
	r.publish(events.VRRPState, "vrrp/ipv4", map[string]string{"family": "ipv4", "state": "master", "priority": "150"})
	waitUntil(t, ctx, "the MASTER's mail", inBoth(master))
	if n := r.count("smtp failed"); n != 0 {
		t.Fatalf("%d mails failed\n%s", n, mta.Log())
	}
	if testing.Verbose() {
		for _, m := range mta.Mail() {
			t.Logf("%s: %s\n%s", m.Box, m.Header.Get("Subject"), m.Body)
		}
	}
	want := map[string]string{
		up:     "=> TCP CHECK succeed on service <=",
		down:   "=> TCP CHECK failed on service : ",
		master: "=> VRRP Instance is now owning VRRP VIPs <=",
	}
	for _, box := range []string{"ops", "noc"} {
		for subject, body := range want {
			d, ok := got[box+" "+subject]
			if !ok {
				t.Errorf("%s's maildir has no %q (it has %d mails)", box, subject, len(got))
				continue
			}
			h := d.Header
			if h.Get("From") != "lb1@example.test" || h.Get("X-Mailer") != "ipvsctl" || h.Get("To") != "ops@example.test, noc@example.test" {
				t.Errorf("%q: From %q, X-Mailer %q, To %q", subject, h.Get("From"), h.Get("X-Mailer"), h.Get("To"))
			}
			if !strings.HasPrefix(h.Get("Received"), "from lb1.example.test ") {
				t.Errorf("%q: Received %q, want the HELO name lb1.example.test", subject, h.Get("Received"))
			}
			if date, err := h.Date(); err != nil || time.Since(date) > time.Hour || time.Until(date) > time.Hour {
				t.Errorf("%q: Date %q: %v", subject, h.Get("Date"), err)
			}
			if !strings.HasPrefix(d.Body, body) || !strings.HasSuffix(d.Body, " <=\n\n") && !strings.HasSuffix(d.Body, " <=\r\n\r\n") {
				t.Errorf("%q: body %q, want keepalived's line %q... <= and an empty line", subject, d.Body, body)
			}
		}
	}
}
