package server

import (
	"context"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/arpguard"
	"github.com/ipvsctl/ipvsctl/arpguard/sshtest"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server/realserver"
	"github.com/ipvsctl/ipvsctl/server/store"
	"golang.org/x/crypto/ssh"
)

// prepCore is a core over a new store holding state, logging in to real
// servers with rs (no kernel: nothing here reconciles).
func prepCore(t *testing.T, state *ipvsmgr.State, rs RealServerSSH) (*Core, *store.Store) {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "ipvsctl.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if state != nil {
		if _, _, err := st.Commit(t.Context(), 0, state, "t", "test", "state"); err != nil {
			t.Fatal(err)
		}
	}
	if rs.Paths == (arpguard.Paths{}) {
		rs.Paths = arpguard.DefaultPaths().UnderRoot(t.TempDir())
	}
	return New(Config{Store: st, RealServerSSH: rs, Log: slog.New(slog.DiscardHandler)}), st
}

// TestRealServerPreps: each address of the desired state once, with the VIPs
// of its services and the mode of their forwarding; the interface, SSH
// address and DR flavour of its last push are kept; mixed forwarding and a
// NAT server without a known gateway say why they cannot be verified.
func TestRealServerPreps(t *testing.T) {
	st := &ipvsmgr.State{Services: []ipvsmgr.Service{
		{Name: "web", Address: "198.18.0.100", Port: 80, Servers: []ipvsmgr.Server{{Address: "198.18.0.11"}, {Address: "198.18.0.12"}}},
		{Name: "api", Address: "198.18.0.101", Port: 443, Servers: []ipvsmgr.Server{{Address: "198.18.0.11"}}},
		{Name: "nat", Address: "198.18.0.200", Port: 80, Forwarding: "nat",
			Servers: []ipvsmgr.Server{{Address: "198.18.0.12"}, {Address: "198.18.1.13"}, {Address: "198.18.1.14"}}},
	}}
	at := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	spec := &arpguard.Target{Host: "198.18.0.11:2222", RIP: netip.MustParseAddr("198.18.0.11"), Interface: "bond0",
		Mode: arpguard.ModeDRArptables, VIPs: []netip.Addr{netip.MustParseAddr("198.18.0.100")}}
	natSpec := &arpguard.Target{RIP: netip.MustParseAddr("198.18.1.14"), Mode: arpguard.ModeNAT, Gateway: netip.MustParseAddr("198.18.1.1")}
	recs := []store.RealServerRecord{
		{Result: arpguard.Result{Target: "198.18.0.11:2222", Host: "198.18.0.11:2222", Action: "push", State: arpguard.StatePrepared, At: at}, Spec: spec},
		{Result: arpguard.Result{Target: "198.18.0.11:22", Host: "198.18.0.11:22", Action: "verify", State: arpguard.StateDrift, At: at.Add(time.Minute)}},
		{Result: arpguard.Result{Target: "198.18.1.14:22", Host: "198.18.1.14:22", Action: "push", State: arpguard.StatePrepared, At: at}, Spec: natSpec},
	}
	preps := realserver.Preps(st, recs, ServiceID)
	if len(preps) != 4 {
		t.Fatalf("%d addresses, want 4: %+v", len(preps), preps)
	}
	r1 := preps[0]
	if r1.RIP != "198.18.0.11" || strings.Join(r1.VIPs, ",") != "198.18.0.100,198.18.0.101" || strings.Join(r1.Services, ",") != "web,api" {
		t.Errorf("r1: %+v", r1)
	}
	if r1.Target == nil || r1.Mode != "dr-arptables" || r1.Target.Interface != "bond0" || r1.Target.Host != "198.18.0.11:2222" ||
		len(r1.Target.VIPs) != 2 || !r1.Remembered {
		t.Errorf("r1 target %+v (mode %s), want the push's interface, port and flavour with both VIPs", r1.Target, r1.Mode)
	}
	if r1.Result == nil || r1.Result.Action != "verify" {
		t.Errorf("r1 last result %+v, want the newer verify", r1.Result)
	}
	if r2 := preps[1]; r2.Target != nil || r2.Mode != "dr-sysctl+nat" || !strings.Contains(r2.Problem, "different forwarding methods") {
		t.Errorf("r2 (dr and nat): %+v", r2)
	}
	if r3 := preps[2]; r3.Target != nil || !strings.Contains(r3.Problem, "gateway") || !strings.Contains(r3.Problem, "--gateway") || r3.Remembered {
		t.Errorf("nat without a gateway: %+v", r3)
	}
	if r4 := preps[3]; r4.Target == nil || r4.Target.Gateway != natSpec.Gateway || r4.Target.Interface != "eth0" {
		t.Errorf("nat with a pushed gateway: %+v, problem %q", r4.Target, r4.Problem)
	}
}

// TestPrepareRealServersRefusals: without an identity nothing runs and the
// error says how to give one; unknown addresses and operations are not
// found; an invalid target names its field; every attempt is audited.
func TestPrepareRealServersRefusals(t *testing.T) {
	state := &ipvsmgr.State{Services: []ipvsmgr.Service{{Name: "web", Address: "198.18.0.100", Port: 80,
		Servers: []ipvsmgr.Server{{Address: "198.18.0.11"}}}}}
	ctx := t.Context()
	a := Actor{Name: "alice", Via: "cli"}
	c, _ := prepCore(t, state, RealServerSSH{Unavailable: "no identity: start with --ssh-identity FILE"})
	if _, err := c.PrepareRealServers(ctx, a, "verify", RealServerSelection{}); CodeOf(err) != CodeUnavailable || !strings.Contains(err.Error(), "--ssh-identity") {
		t.Errorf("without an identity: %v (%s)", err, CodeOf(err))
	}
	c, _ = prepCore(t, state, RealServerSSH{SSHConfig: arpguard.SSHConfig{User: "root", Signers: []ssh.Signer{sshtest.NewSigner(t)}, KnownHostsFile: "/nonexistent"}})
	if _, err := c.PrepareRealServers(ctx, a, "verify", RealServerSelection{RIPs: []string{"198.18.0.99"}}); CodeOf(err) != CodeNotFound {
		t.Errorf("an address no service has: %v", err)
	}
	if _, err := c.PrepareRealServers(ctx, a, "format", RealServerSelection{}); CodeOf(err) != CodeNotFound {
		t.Errorf("an unknown operation: %v", err)
	}
	bad := arpguard.Target{RIP: netip.MustParseAddr("198.18.0.11"), Mode: arpguard.ModeDRSysctl, Interface: "eth0"}
	if _, err := c.PrepareRealServers(ctx, a, "verify", RealServerSelection{Targets: []arpguard.Target{bad}}); CodeOf(err) != CodeBadInput || !strings.Contains(err.Error(), "vips") {
		t.Errorf("a target without VIPs: %v", err)
	}
	entries, err := c.Audit(ctx, store.AuditFilter{Action: "realserver verify"})
	if err != nil || len(entries) != 2 || entries[0].Outcome != store.OutcomeFailure || entries[1].Target != "198.18.0.99" {
		t.Errorf("audit: %+v, err %v", entries, err)
	}
}

// TestVerifyFromStateStoresAndAudits: a verify of the desired state's real
// servers reports each one (unreachable here: the SSH port refuses), stores
// the result as its last, and audits the run with its counts.
func TestVerifyFromStateStoresAndAudits(t *testing.T) {
	state := &ipvsmgr.State{Services: []ipvsmgr.Service{{Name: "web", Address: "198.18.0.100", Port: 80,
		Servers: []ipvsmgr.Server{{Address: "198.18.0.11"}, {Address: "198.18.0.12"}}}}}
	c, _ := prepCore(t, state, RealServerSSH{SSHConfig: arpguard.SSHConfig{User: "root", Signers: []ssh.Signer{sshtest.NewSigner(t)},
		KnownHostsFile: filepath.Join(t.TempDir(), "known_hosts"), Dial: sshtest.Refuse}})
	ctx := t.Context()
	rep, err := c.PrepareRealServers(ctx, Actor{Name: "alice", Via: "panel", Addr: "198.51.100.7"}, "verify", RealServerSelection{RIPs: []string{"198.18.0.12"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 1 || rep.Results[0].Host != "198.18.0.12:22" || rep.Results[0].State != arpguard.StateUnreachable ||
		!strings.Contains(rep.Results[0].Detail, "connection refused") {
		t.Fatalf("report %+v", rep)
	}
	preps, err := c.RealServers(ctx)
	if err != nil || len(preps) != 2 || preps[0].Result != nil || preps[1].Result == nil || preps[1].Result.State != arpguard.StateUnreachable {
		t.Fatalf("stored: %+v, err %v", preps, err)
	}
	entries, err := c.Audit(ctx, store.AuditFilter{Action: "realserver verify"})
	if err != nil || len(entries) != 1 || entries[0].Target != "198.18.0.12:22" || entries[0].Detail != "1 unreachable" ||
		entries[0].ClientAddr != "198.51.100.7" || entries[0].Via != "panel" {
		t.Fatalf("audit: %+v, err %v", entries, err)
	}
}

// TestPrepareRealServersOverSSH drives a real sshd in a namespace through
// the core: a push with an interface of its own is remembered, so that a
// verify of the desired state (which knows only VIPs and forwarding) checks
// that interface and finds the server prepared; drift made behind its back
// is reported item by item and stored; an address without a route is
// unreachable with the SSH error; undo restores the real server.
func TestPrepareRealServersOverSSH(t *testing.T) {
	b := sshtest.Start(t)
	b.InRS(t, "ip link add rs0 type veth peer name rs0p && ip link set rs0 up")
	const vip = "198.18.7.100"
	state := &ipvsmgr.State{Services: []ipvsmgr.Service{{Name: "web", Address: vip, Port: 80,
		Servers: []ipvsmgr.Server{{Name: "r1", Address: sshtest.RIP}, {Name: "gone", Address: "192.0.2.1"}}}}}
	c, _ := prepCore(t, state, RealServerSSH{SSHConfig: arpguard.SSHConfig{User: "root", Signers: []ssh.Signer{b.Signer},
		KnownHostsFile: b.KnownHosts(t, b.HostKey), Dial: b.Dial, Timeout: 20 * time.Second}})
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	a := Actor{Name: "alice", Via: "cli"}
	target := arpguard.Target{RIP: netip.MustParseAddr(sshtest.RIP), Interface: "rs0", Mode: arpguard.ModeDRSysctl,
		VIPs: []netip.Addr{netip.MustParseAddr(vip)}}
	rep, err := c.PrepareRealServers(ctx, a, "push", RealServerSelection{Targets: []arpguard.Target{target}})
	if err != nil || len(rep.Results) != 1 || rep.Results[0].State != arpguard.StatePrepared {
		t.Fatalf("push: %+v, err %v", rep, err)
	}
	if got := strings.TrimSpace(b.InRS(t, "cat /proc/sys/net/ipv4/conf/rs0/arp_ignore")); got != "1" {
		t.Fatalf("rs0 arp_ignore = %s after the push, want 1", got)
	}

	rep, err = c.PrepareRealServers(ctx, a, "verify", RealServerSelection{})
	if err != nil || len(rep.Results) != 2 {
		t.Fatalf("verify all: %+v, err %v", rep, err)
	}
	byHost := map[string]arpguard.Result{}
	for _, r := range rep.Results {
		byHost[r.Host] = r
	}
	if r := byHost[sshtest.RIP+":22"]; r.Summary() != "prepared" {
		t.Errorf("r1 verified from the desired state: %q, want prepared (checked on rs0, as pushed)", r.Summary())
	}
	if r := byHost["192.0.2.1:22"]; r.State != arpguard.StateUnreachable || !strings.Contains(r.Detail, "network is unreachable") {
		t.Errorf("an address without a route: %q", r.Summary())
	}

	b.InRS(t, "ip addr del "+vip+"/32 dev lo && echo 0 >/proc/sys/net/ipv4/conf/rs0/arp_ignore")
	rep, err = c.PrepareRealServers(ctx, a, "verify", RealServerSelection{RIPs: []string{sshtest.RIP}})
	if err != nil || len(rep.Results) != 1 || rep.Results[0].State != arpguard.StateDrift || len(rep.Results[0].Drift) != 2 {
		t.Fatalf("verify after drift: %+v, err %v", rep, err)
	}
	preps, err := c.RealServers(ctx)
	if err != nil || preps[0].Result == nil || preps[0].Result.State != arpguard.StateDrift || !preps[0].Remembered ||
		!strings.Contains(strings.Join(preps[0].Result.Drift, "; "), "VIP "+vip+" missing on lo") {
		t.Fatalf("stored after drift: %+v, err %v", preps, err)
	}

	rep, err = c.PrepareRealServers(ctx, a, "undo", RealServerSelection{Targets: []arpguard.Target{target}})
	if err != nil || rep.Results[0].State != arpguard.StateUndone {
		t.Fatalf("undo: %+v, err %v", rep, err)
	}
	if got := strings.TrimSpace(b.InRS(t, "cat /proc/sys/net/ipv4/conf/all/arp_ignore")); got != "0" {
		t.Errorf("all/arp_ignore = %s after undo, want 0", got)
	}
	// Undo keeps what the push was given: the next verify still checks rs0.
	if preps, _ = c.RealServers(ctx); preps[0].Target == nil || preps[0].Target.Interface != "rs0" {
		t.Errorf("after undo: %+v", preps[0].Target)
	}
}
