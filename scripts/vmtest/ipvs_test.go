//go:build vmtest

package vmtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
)

func drDoc(sched, servers string) string {
	return fmt.Sprintf(`{"settings":{"network":"dr"},"services":[{"name":"web","protocol":"tcp","address":"%s","port":80,
	"interface":"eth0","scheduler":"%s","servers":[%s]}]}`, vip, sched, servers)
}

const rs12 = `{"name":"rs1","address":"198.18.0.11","weight":1},{"name":"rs2","address":"198.18.0.12","weight":1}`

func TestNoIPVSModuleIsAClearError(t *testing.T) {
	if _, err := os.Stat("/proc/net/ip_vs"); err == nil {
		testenv.Need(t, "ip_vs is already loaded; scripts/vmtest.sh runs this test first in a fresh VM")
	}
	// With modprobe out of reach ipvsctl cannot load ip_vs: it must say so and exit 1.
	cmd := exec.Command(os.Getenv("IPVSCTL_BIN"), "--db", t.TempDir()+"/db", "status")
	cmd.Env = append(os.Environ(), "PATH=/nonexistent")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("want exit status 1, got %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "kernel IPVS is not available") || strings.Contains(string(out), "panic") {
		t.Fatalf("unclear error: %s", out)
	}
	t.Logf("ipvsctl said: %s", out)
}

func TestDRRoundRobin(t *testing.T) {
	l := newLab(t, 3, false)
	out := l.apply(drDoc("rr", rs12+`,{"name":"rs3","address":"198.18.0.13"}`))
	t.Logf("apply:\n%s", out)
	want := "-A -t 198.18.0.100:80 -s rr\n" +
		"-a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 1\n" +
		"-a -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 1\n" +
		"-a -t 198.18.0.100:80 -r 198.18.0.13:80 -g -w 1\n"
	if got := l.saved(); got != want {
		t.Fatalf("ipvsadm -Sn:\n%s\nwant:\n%s", got, want)
	}
	if !strings.Contains(l.ns(l.dir, "ip -4 addr show dev eth0"), vip+"/32") {
		t.Fatal("VIP not brought up on the director's eth0")
	}
	counts := l.get(vip+":80", 30)
	for _, rs := range []string{"rs1", "rs2", "rs3"} {
		if counts[rs] != 10 {
			t.Fatalf("round robin over 30 requests: %v", counts)
		}
	}
	// status lists the service, and the director's counters saw every request.
	st, _ := l.ipvsctl("status")
	if !strings.Contains(st, "TCP  198.18.0.100:80 rr") {
		t.Fatalf("status does not list the service:\n%s", st)
	}
	waitFor(t, "IPVS counters (summed every 2 s)", 10*time.Second, func() bool {
		out, _ := l.ipvsctl("status", "--json")
		return strings.Contains(out, `"conns": 30`)
	})
}

func TestWeightedSplit(t *testing.T) {
	l := newLab(t, 2, false)
	l.apply(drDoc("wrr", `{"address":"198.18.0.11","weight":3},{"address":"198.18.0.12","weight":1}`))
	counts := l.get(vip+":80", 80)
	if counts["rs1"] != 60 || counts["rs2"] != 20 {
		t.Fatalf("wrr 3:1 over 80 requests: %v", counts)
	}
}

func TestNATThroughDirector(t *testing.T) {
	l := newLab(t, 0, true)
	l.apply(fmt.Sprintf(`{"settings":{"network":"nat"},"services":[{"address":"%s","port":8000,"interface":"eth0","scheduler":"rr",
	"servers":[{"address":"198.18.1.11","port":8080},{"address":"198.18.1.12","port":8080}]}]}`, vip))
	if got := l.saved(); !strings.Contains(got, "-a -t 198.18.0.100:8000 -r 198.18.1.11:8080 -m -w 1") {
		t.Fatalf("ipvsadm -Sn:\n%s", got)
	}
	counts := l.get(vip+":8000", 20)
	if counts["nat1"] != 10 || counts["nat2"] != 10 {
		t.Fatalf("NAT round robin: %v", counts)
	}
}

func TestFWMarkService(t *testing.T) {
	l := newLab(t, 2, false)
	out := l.apply(fmt.Sprintf(`{"services":[{"fwmark":5,"address":"%s","interface":"eth0","scheduler":"rr",
	"match":[{"protocol":"tcp","ports":[80,8080]}],
	"servers":[{"address":"198.18.0.11"},{"address":"198.18.0.12"}]}]}`, vipMark))
	t.Logf("apply:\n%s", out)
	if got := l.saved(); !strings.Contains(got, "-A -f 5 -s rr") || !strings.Contains(got, "-a -f 5 -r 198.18.0.12:0 -g -w 1") {
		t.Fatalf("ipvsadm -Sn:\n%s", got)
	}
	rules := l.ns(l.dir, "iptables -t mangle -S")
	if !strings.Contains(rules, "-A PREROUTING -j IPVSCTL-FWMARK") || !strings.Contains(rules, "--set-xmark 0x5/0xffffffff") {
		t.Fatalf("mangle rules:\n%s", rules)
	}
	counts := l.get(vipMark+":80", 10)
	counts8080 := l.get(vipMark+":8080", 10)
	if counts["rs1"] != 5 || counts["rs2"] != 5 || counts8080["rs1"]+counts8080["rs2"] != 10 {
		t.Fatalf("fwmark balancing: port 80 %v, port 8080 %v", counts, counts8080)
	}
	// A second apply changes nothing (idempotent rules), removal cleans up.
	if out := l.apply(fmt.Sprintf(`{"services":[{"fwmark":5,"address":"%s","interface":"eth0","scheduler":"rr",
	"match":[{"protocol":"tcp","ports":[80,8080]}],
	"servers":[{"address":"198.18.0.11"},{"address":"198.18.0.12"}]}]}`, vipMark)); !strings.Contains(out, "0 changes applied, 0 failed") {
		t.Fatalf("second apply changed something:\n%s", out)
	}
	if n := strings.Count(l.ns(l.dir, "iptables -t mangle -S IPVSCTL-FWMARK"), "-A IPVSCTL-FWMARK"); n != 1 {
		t.Fatalf("want 1 mark rule after two applies, got %d", n)
	}
	l.apply(`{"services":[]}`)
	if rules := l.ns(l.dir, "iptables -t mangle -S"); strings.Contains(rules, "IPVSCTL") {
		t.Fatalf("mark rules left behind:\n%s", rules)
	}
	if strings.Contains(l.ns(l.dir, "ip -4 addr show dev eth0"), vipMark) {
		t.Fatal("VIP left up after its service went")
	}
}

func TestIPv6Service(t *testing.T) {
	l := newLab(t, 2, false)
	l.apply(fmt.Sprintf(`{"services":[{"address":"%s","port":80,"interface":"eth0","scheduler":"rr",
	"persistence":0,"servers":[{"address":"2001:db8::11"},{"address":"2001:db8::12"}]}]}`, vip6))
	if got := l.saved(); !strings.Contains(got, "-a -t [2001:db8::100]:80 -r [2001:db8::12]:80 -g -w 1") {
		t.Fatalf("ipvsadm -Sn:\n%s", got)
	}
	counts := l.get("["+vip6+"]:80", 10)
	if counts["rs1"] != 5 || counts["rs2"] != 5 {
		t.Fatalf("IPv6 round robin: %v", counts)
	}
}

func TestInPlaceChangeKeepsConnection(t *testing.T) {
	l := newLab(t, 2, false)
	l.apply(drDoc("rr", rs12))
	c, err := l.dial(vip + ":80")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first, err := ask(c)
	if err != nil {
		t.Fatal(err)
	}
	// Weight, scheduler, flags, persistence, thresholds and forwarding of the other server change.
	out := l.apply(fmt.Sprintf(`{"services":[{"name":"web","address":"%s","port":80,"interface":"eth0","scheduler":"sh",
	"scheduler_flags":["port"],"persistence":60,"persistence_netmask":"255.255.255.0",
	"servers":[{"address":"198.18.0.11","weight":5,"upper_threshold":100},{"address":"198.18.0.12","weight":7,"lower_threshold":1,"upper_threshold":50}]}]}`, vip))
	if strings.Contains(out, "ipvsadm -D") || strings.Contains(out, "ipvsadm -d") || strings.Contains(out, "ipvsadm -A") {
		t.Fatalf("an edit deleted or re-added something:\n%s", out)
	}
	want := "-A -t 198.18.0.100:80 -s sh -p 60 -M 255.255.255.0 -b sh-port\n" +
		"-a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 5\n" +
		"-a -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 7\n"
	if got := l.saved(); got != want {
		t.Fatalf("ipvsadm -Sn after edit:\n%s\nwant:\n%s", got, want)
	}
	// ipvsadm -S does not save thresholds; its listing shows them.
	thr := strings.Join(strings.Fields(l.ns(l.dir, "ipvsadm -Ln --thresholds")), " ")
	if !strings.Contains(thr, "-> 198.18.0.11:80 100 0") || !strings.Contains(thr, "-> 198.18.0.12:80 50 1") {
		t.Fatalf("thresholds after edit: %s", thr)
	}
	for i := range 3 {
		again, err := ask(c)
		if err != nil || again != first {
			t.Fatalf("established connection broken by the edit (request %d): %q, %v (first answer %q)", i, again, err, first)
		}
	}
}

func TestRemovedServerDrainsThenGoes(t *testing.T) {
	l := newLab(t, 2, false)
	l.apply(drDoc("rr", rs12))
	// Hold a connection to each real server.
	held := map[string]net.Conn{}
	for len(held) < 2 {
		c, err := l.dial(vip + ":80")
		if err != nil {
			t.Fatal(err)
		}
		name, err := ask(c)
		if err != nil {
			t.Fatal(err)
		}
		if held[name] != nil {
			c.Close()
			continue
		}
		held[name] = c
	}
	defer func() {
		for _, h := range held {
			h.Close()
		}
	}()
	bin := os.Getenv("IPVSCTL_BIN")
	f := t.TempDir() + "/one.json"
	os.WriteFile(f, []byte(drDoc("rr", `{"name":"rs1","address":"198.18.0.11"}`)), 0o600)
	apply := exec.Command("ip", "netns", "exec", l.dir, bin, "--db", l.db, "apply", "-f", f)
	var out strings.Builder
	apply.Stdout, apply.Stderr = &out, &out
	if err := apply.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- apply.Wait() }()
	waitFor(t, "rs2 at weight 0", 20*time.Second, func() bool {
		return strings.Contains(l.saved(), "-r 198.18.0.12:80 -g -w 0")
	})
	if name, err := ask(held["rs2"]); err != nil || name != "rs2" {
		t.Fatalf("draining server's connection broke: %q %v", name, err)
	}
	if c := l.get(vip+":80", 4); c["rs1"] != 4 {
		t.Fatalf("new connections still reach the draining server: %v", c)
	}
	held["rs2"].Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("apply: %v\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		apply.Process.Kill()
		t.Fatalf("apply still waiting 60 s after the last connection closed:\n%s", out.String())
	}
	if got := l.saved(); strings.Contains(got, "198.18.0.12") {
		t.Fatalf("drained server not deleted:\n%s\napply said:\n%s", got, out.String())
	}
	t.Logf("apply said:\n%s", out.String())
}

func TestOutOfBandDeleteRepaired(t *testing.T) {
	l := newLab(t, 2, false)
	doc := drDoc("wlc", rs12)
	l.apply(doc)
	before := l.saved()
	l.ns(l.dir, "ipvsadm -D -t "+vip+":80")
	if strings.Contains(l.saved(), vip) {
		t.Fatal("ipvsadm -D did not delete the service")
	}
	out := l.apply(doc)
	if !strings.Contains(out, "ipvsadm -A -t 198.18.0.100:80 -s wlc") {
		t.Fatalf("apply did not report the repair:\n%s", out)
	}
	if after := l.saved(); after != before {
		t.Fatalf("after repair:\n%s\nbefore:\n%s", after, before)
	}
	if c := l.get(vip+":80", 4); c["rs1"]+c["rs2"] != 4 {
		t.Fatalf("traffic after repair: %v", c)
	}
}

// TestFailuresAreNamedOthersApplied: the kernel refuses two real servers (the
// lab subnet's broadcast address, which only the kernel knows is not
// unicast), one in the middle of a batch and one last; each is named with its
// reason, and everything else is applied.
func TestFailuresAreNamedOthersApplied(t *testing.T) {
	l := newLab(t, 2, false)
	f := t.TempDir() + "/state.json"
	doc := `{"services":[
	 {"name":"a","address":"198.18.0.101","port":80,"servers":[{"address":"198.18.0.11"}]},
	 {"name":"b","address":"198.18.0.102","port":80,"servers":[{"address":"198.18.0.11"},{"address":"198.18.0.255"},{"address":"198.18.0.12"}]},
	 {"name":"c","address":"198.18.0.103","port":80,"servers":[{"address":"198.18.0.12"},{"address":"198.18.0.255"}]}]}`
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := l.ipvsctl("apply", "-f", f)
	if err == nil {
		t.Fatalf("apply with refused real servers exited 0:\n%s", out)
	}
	for _, want := range []string{
		"failed: b: ipvsadm -a -t 198.18.0.102:80 -r 198.18.0.255:80 -g -w 1: invalid argument: for dr/tun the real server's address must be reachable unicast",
		"failed: c: ipvsadm -a -t 198.18.0.103:80 -r 198.18.0.255:80 -g -w 1: invalid argument",
		"7 changes applied, 2 failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %q:\n%s", want, out)
		}
	}
	saved := l.saved()
	for _, want := range []string{"-r 198.18.0.11:80", "-a -t 198.18.0.102:80 -r 198.18.0.12:80", "-a -t 198.18.0.103:80 -r 198.18.0.12:80"} {
		if !strings.Contains(saved, want) {
			t.Errorf("ipvsadm -Sn lacks %q:\n%s", want, saved)
		}
	}
	if strings.Contains(saved, "198.18.0.255") {
		t.Errorf("a refused real server is in the kernel:\n%s", saved)
	}
}
