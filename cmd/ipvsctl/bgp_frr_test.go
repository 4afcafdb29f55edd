package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Tier 2 (root, the host's kernel, no IPVS needed): FRR 8.4 (zebra, bfdd,
// bgpd) as the upstream router of three `ipvsctl serve` directors, in
// namespaces on one bridge as in TestBGPECMPAtBIRD. FRR's bgpd, when a
// session comes up, learns its local address and interface and has bfdd
// delete the BFD session it had and make a new one; a director whose BFD was
// already up took the old session's end as BFD down and reset the session it
// had just established, once per director and start. The speaker turns BFD
// on only once the session is up (bgp.Speaker.TendPeers): every session is
// established once and never dropped, BFD up on both sides.
func TestBGPAtFRRWithoutABFDFlap(t *testing.T) {
	needRouterTools(t, "frr", "vtysh", "/usr/lib/frr/zebra", "/usr/lib/frr/bfdd", "/usr/lib/frr/bgpd")
	ctx, cancel := context.WithTimeout(t.Context(), 180*time.Second)
	defer cancel()
	const n = 3
	rns, dns := routerBed(t, ctx, "frr", n)

	// FRR's daemons run as frr: their directory is one frr can reach.
	dir, err := os.MkdirTemp("/tmp", "ipvsctl-frr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var b strings.Builder
	b.WriteString("frr defaults traditional\nhostname rtr\ndebug bgp bfd\n!\nrouter bgp 65000\n bgp router-id 198.18.0.1\n no bgp ebgp-requires-policy\n bgp bestpath as-path multipath-relax\n")
	for i := 1; i <= n; i++ {
		a := fmt.Sprintf("198.18.0.1%d", i)
		fmt.Fprintf(&b, " neighbor %s remote-as 65001\n neighbor %s timers connect 2\n neighbor %s bfd profile ipvsctl\n", a, a, a)
	}
	b.WriteString(" address-family ipv4 unicast\n  maximum-paths 8\n exit-address-family\n!\n")
	bfdd := "hostname rtr\ndebug bfd peer\nbfd\n profile ipvsctl\n  transmit-interval 300\n  receive-interval 300\n !\n!\n"
	for name, conf := range map[string]string{"zebra.conf": "hostname rtr\n", "bfdd.conf": bfdd, "bgpd.conf": b.String()} {
		if err := os.WriteFile(dir+"/"+name, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	netnsSh(t, ctx, "chown -R frr:frr "+dir+" && chmod 0755 "+dir)
	for _, d := range []string{"zebra", "bfdd", "bgpd"} {
		args := []string{"netns", "exec", rns, "/usr/lib/frr/" + d, "-d", "-P", "0", "-f", dir + "/" + d + ".conf", "-i", dir + "/" + d + ".pid",
			"-z", dir + "/zserv.api", "--vty_socket", dir, "--log", "file:" + dir + "/" + d + ".log"}
		if d == "bfdd" {
			args = append(args, "--bfdctl", dir+"/bfdd.sock")
		}
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("start %s: %v\n%s", d, err, out)
		}
		if d == "zebra" {
			waitFor(t, 10*time.Second, "zebra's socket", func() bool { _, err := os.Stat(dir + "/zserv.api"); return err == nil })
		}
	}
	t.Cleanup(func() {
		for _, d := range []string{"bgpd", "bfdd", "zebra"} {
			if b, err := os.ReadFile(dir + "/" + d + ".pid"); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					_ = syscall.Kill(pid, syscall.SIGTERM)
				}
			}
		}
		if t.Failed() {
			for _, d := range []string{"bgpd", "bfdd"} {
				log, _ := os.ReadFile(dir + "/" + d + ".log")
				t.Logf("%s.log:\n%s", d, log)
			}
		}
	})
	vtysh := func(v any, cmd string) {
		t.Helper()
		out, err := exec.CommandContext(ctx, "vtysh", "--vty_socket", dir, "-c", cmd).CombinedOutput()
		if err == nil {
			err = json.Unmarshal(out, v)
		}
		if err != nil {
			t.Fatalf("vtysh -c %q: %v\n%s", cmd, err, out)
		}
	}
	type neighbor struct {
		BgpState               string `json:"bgpState"`
		ConnectionsEstablished int    `json:"connectionsEstablished"`
		ConnectionsDropped     int    `json:"connectionsDropped"`
	}
	neighbors := func() map[string]neighbor {
		var m map[string]neighbor
		vtysh(&m, "show bgp neighbors json")
		return m
	}
	bfdUp := func() []string {
		var ps []struct{ Peer, Status string }
		vtysh(&ps, "show bfd peers json")
		var up []string
		for _, p := range ps {
			if p.Status == "up" {
				up = append(up, p.Peer)
			}
		}
		slices.Sort(up)
		return up
	}

	doc := writeDoc(t, `{"settings": {"network": "dr", "bgp": {"asn": 65001,
	    "peers": [{"address": "198.18.0.1", "asn": 65000, "hold_time": 9, "bfd": {"interval": 0.3, "multiplier": 3}}]}},
	  "services": [{"name": "web", "protocol": "tcp", "address": "198.18.100.1", "port": 80, "servers": [{"name": "r1", "address": "198.18.1.11"}]}]}`)
	ds := make([]*serveProc, n)
	var addrs []string
	for i := range n {
		ds[i] = newServeProc(t, fmt.Sprintf("d%d", i+1))
		ds[i].netns = dns[i]
		ds[i].start()
		addr := fmt.Sprintf("198.18.0.1%d", i+1)
		addrs = append(addrs, addr)
		ds[i].mustCLI("node", "set", "--router-id", addr, "--bgp-source", addr)
		ds[i].mustCLI("apply", "-f", doc)
	}
	start := time.Now()
	waitFor(t, 60*time.Second, "every session Established at FRR, BFD up and three next hops", func() bool {
		nb := neighbors()
		for _, a := range addrs {
			if nb[a].BgpState != "Established" {
				return false
			}
		}
		return slices.Equal(bfdUp(), addrs) && slices.Equal(kernelNexthops(t, ctx, rns, "-4", "198.18.100.1"), addrs)
	})
	t.Logf("sessions Established, BFD up and the ECMP route at FRR %s after the directors started", time.Since(start).Round(time.Millisecond))
	// Long enough for the flap, which came within a second of the session.
	time.Sleep(5 * time.Second)
	for a, nb := range neighbors() {
		if nb.BgpState != "Established" || nb.ConnectionsEstablished != 1 || nb.ConnectionsDropped != 0 {
			t.Errorf("FRR's neighbor %s: %+v, want Established once and never dropped", a, nb)
		}
	}
	if up := bfdUp(); !slices.Equal(up, addrs) {
		t.Errorf("BFD up at FRR for %v, want %v", up, addrs)
	}
	for _, d := range ds {
		b := d.status().BGP
		if b == nil || len(b.Peers) != 1 || !b.Peers[0].Up || b.Peers[0].BFD != "up" {
			t.Errorf("%s's BGP status: %+v", d.name, b)
		}
	}
}
