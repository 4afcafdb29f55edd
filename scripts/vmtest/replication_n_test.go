//go:build vmtest

package vmtest

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/server/trust/trusttest"
)

// TestReplicationToNDirectorsOnALink: four directors in namespaces on one
// link, each serving on its own address with a certificate the pair CA
// signed for it. The source's edits reach both followers' kernels (ipvsadm
// reads them back); a follower refuses a local edit naming the source; a
// director whose CA certificate names another address is refused at the
// source (name checked against the address it calls from); a follower that
// was stopped catches up when it starts again.
func TestReplicationToNDirectorsOnALink(t *testing.T) {
	id := fmt.Sprintf("n%d", labSeq.Add(1))
	sw := id + "sw"
	addrs := []string{"198.18.0.1", "198.18.0.3", "198.18.0.5", "198.18.0.7"}
	names := []string{"source", "follower1", "follower2", "misnamed"}
	run(t, "ip", "netns", "add", sw)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", sw).Run() })
	base := &lab{t: t, id: id}
	base.ns(sw, "ip link add br0 type bridge")
	base.ns(sw, "ip link set br0 up")
	ca := trusttest.NewCA(t, "pair CA")
	dir := t.TempDir()
	caFile := filepath.Join(dir, "pair-ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	var ds []*director
	for i, addr := range addrs {
		l := *base
		l.dir, l.db = fmt.Sprintf("%sd%d", id, i+1), filepath.Join(dir, fmt.Sprintf("d%d.db", i+1))
		run(t, "ip", "netns", "add", l.dir)
		ns := l.dir
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
		base.ns(ns, "ip link set lo up")
		host := "v" + ns
		run(t, "ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", ns)
		run(t, "ip", "link", "set", host, "netns", sw)
		base.ns(sw, "ip link set "+host+" master br0 up")
		base.ns(ns, "ip addr add "+addr+"/24 dev eth0")
		base.ns(ns, "ip link set eth0 up")
		named := addr
		if names[i] == "misnamed" {
			named = "198.18.0.9" // not the address it calls from
		}
		c, k := trusttest.WriteFiles(t, ca.Issue(t, names[i], []net.IP{net.ParseIP(named)}), dir, names[i])
		d := &director{l: &l, addr: addr, args: []string{"--tls-cert", c, "--tls-key", k, "--interval", "1h"}}
		t.Cleanup(func() {
			d.stop(syscall.SIGTERM)
			if t.Failed() && d.logs != nil {
				t.Logf("%s's daemon logs:\n%s", names[i], strings.Join(append(d.all, d.logs.String()), "\n--- restarted ---\n"))
			}
		})
		ds = append(ds, d)
	}
	src := ds[0]
	tok := src.l.peerToken()
	for _, d := range ds {
		d.start()
	}
	src.l.cmdOut("node", "set", "--replication", "source", "--peer-ca", caFile)
	for _, d := range ds[1:] {
		d.l.cmdOut("node", "set", "--replication", "follower", "--peer-url", "https://"+addrs[0]+":3636", "--peer-token", tok, "--peer-ca", caFile)
	}
	doc := func(rs string) string {
		return `{"services":[{"name":"web","address":"198.18.0.100","port":80,"scheduler":"rr",
 "servers":[{"address":"` + rs + `","weight":1}]}]}`
	}
	start := time.Now()
	src.l.apply(doc("198.18.0.11"))
	for _, d := range ds[1:3] {
		waitFor(t, d.l.dir+"'s kernel to carry the source's edit", 20*time.Second, func() bool {
			return strings.Contains(d.l.saved(), "-r 198.18.0.11:80")
		})
	}
	t.Logf("the source's edit in both followers' kernels (ipvsadm -Sn) %s after the apply", time.Since(start).Round(time.Millisecond))
	for _, d := range ds[1:3] {
		for _, line := range strings.Split(d.l.cmdOut("node", "show"), "\n") {
			if strings.HasPrefix(line, "replication:") {
				t.Logf("%s %s", d.l.dir, line)
			}
		}
	}

	// A local edit on a follower is refused, naming the source.
	f := t.TempDir() + "/local.json"
	if err := os.WriteFile(f, []byte(doc("198.18.0.12")), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := ds[1].l.ipvsctl("apply", "-f", f); err == nil || !strings.Contains(out, "follows the source https://"+addrs[0]+":3636") {
		t.Fatalf("a local edit on a follower: %v\n%s", err, out)
	}

	// The misnamed director is refused at the source, and has nothing.
	followers := func() []map[string]any {
		var v struct {
			Followers []map[string]any `json:"followers"`
		}
		if err := json.Unmarshal([]byte(src.l.cmdOut("status", "--json")), &v); err != nil {
			t.Fatal(err)
		}
		return v.Followers
	}
	waitFor(t, "the misnamed director refused at the source", 20*time.Second, func() bool {
		for _, f := range followers() {
			if f["refused"] == true && f["address"] == addrs[3] && strings.Contains(fmt.Sprint(f["error"]), "not for "+addrs[3]) {
				return true
			}
		}
		return false
	})
	if strings.Contains(ds[3].l.saved(), "198.18.0.11") {
		t.Error("the misnamed director got the source's state")
	}

	// A stopped follower catches up.
	ds[2].stop(syscall.SIGTERM)
	ds[2].all = append(ds[2].all, ds[2].logs.String())
	src.l.apply(doc("198.18.0.21"))
	waitFor(t, "follower1's kernel to carry the second edit", 20*time.Second, func() bool {
		return strings.Contains(ds[1].l.saved(), "-r 198.18.0.21:80")
	})
	waitFor(t, "the source to show follower2 behind", 20*time.Second, func() bool {
		for _, f := range followers() {
			if f["address"] == addrs[2] && f["in_sync"] == false && f["connected"] == false && f["lag_seconds"].(float64) > 0 {
				return true
			}
		}
		return false
	})
	t.Logf("the source's status while follower2 is down:\n%s", src.l.cmdOut("status"))
	restarted := time.Now()
	ds[2].start()
	waitFor(t, "follower2's kernel to carry the edit it missed", 30*time.Second, func() bool {
		return strings.Contains(ds[2].l.saved(), "-r 198.18.0.21:80") && !strings.Contains(ds[2].l.saved(), "198.18.0.11")
	})
	t.Logf("follower2 caught up %s after its start", time.Since(restarted).Round(time.Millisecond))
}
