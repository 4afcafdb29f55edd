package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/trust"
)

func TestNodeSetShow(t *testing.T) {
	k := fakekernel.New()
	db := filepath.Join(t.TempDir(), "ipvsctl.db")
	step := func(want int, args ...string) cliRun {
		t.Helper()
		r := runCLI(t, k, append([]string{"--db", db}, args...)...)
		if r.code != want {
			t.Fatalf("ipvsctl %s: exit %d, want %d\n%s%s", strings.Join(args, " "), r.code, want, r.stdout, r.stderr)
		}
		return r
	}
	r := step(0, "node", "show")
	if !strings.Contains(r.stdout, "priority:    100") || !strings.Contains(r.stdout, "role:        auto") {
		t.Fatalf("defaults:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "fingerprint: sha256:") || !strings.Contains(r.stdout, "replicated exec checks: refused") {
		t.Fatalf("defaults:\n%s", r.stdout)
	}
	own, err := trust.CertFingerprint(filepath.Join(filepath.Dir(db), trust.CertFile))
	if err != nil || !strings.Contains(r.stdout, "fingerprint: "+own+"\n") {
		t.Fatalf("node show does not print this director's own fingerprint %s (%v):\n%s", own, err, r.stdout)
	}
	// An https:// peer needs its certificate's fingerprint; openssl's form is read.
	step(2, "node", "set", "--peer-url", "https://198.18.0.2:3636/", "--peer-token", "s3cret")
	fp := "SHA256 Fingerprint=" + strings.TrimSuffix(strings.Repeat("AB:", 32), ":")
	step(0, "node", "set", "--priority", "150", "--peer-url", "https://198.18.0.2:3636/", "--peer-token", "s3cret",
		"--peer-fingerprint", fp, "--address", "198.18.0.3")
	step(0, "node", "set", "--role", "backup")
	r = step(0, "node", "show", "--json")
	var v server.NodeView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatal(err)
	}
	if v.Priority != 150 || v.Role != "backup" || v.PeerURL != "https://198.18.0.2:3636" || !v.PeerTokenSet || v.Address != "198.18.0.3" ||
		v.PeerFingerprint != "sha256:"+strings.Repeat("ab", 32) || v.AllowReplicatedExec {
		t.Errorf("node show --json: %+v", v)
	}
	if strings.Contains(r.stdout, "s3cret") {
		t.Error("the peer token is shown")
	}
	// Bad values are refused with the field and the value, exit 2.
	for _, bad := range [][]string{{"--priority", "0"}, {"--role", "primary"}, {"--peer-url", "198.18.0.2"}, {"--address", "eth0"},
		{"--peer-url", "http://198.18.0.2:3636"}, {"--peer-fingerprint", "sha256:zz"}} {
		r = step(2, append([]string{"node", "set"}, bad...)...)
		if !strings.Contains(r.stderr, strings.TrimPrefix(strings.ReplaceAll(bad[0], "-", "_")[2:], "")) {
			t.Errorf("node set %v: %s", bad, r.stderr)
		}
	}
	step(2, "node", "set")
	r = step(0, "audit", "--action", "node set")
	if !strings.Contains(r.stdout, "priority 150") || !strings.Contains(r.stdout, "peer_token set") {
		t.Errorf("audit:\n%s", r.stdout)
	}
}

func TestRedundancyLines(t *testing.T) {
	age := 0.35
	r := &server.RedundancyStatus{Role: "backup", Priority: 100, VRID: 51, Interface: "eth0", Master: "198.18.0.2", MasterPriority: 200,
		LastAdvertAge: &age, VIPs: []string{"198.18.0.100"},
		SyncDaemon: server.SyncDaemonStatus{Enabled: true, Running: []string{"backup sync daemon on eth0, syncid 0"}}}
	want := "backup of VRID 51 on eth0, priority 100; master 198.18.0.2 (priority 200), last advert 0.3s ago; VIPs 198.18.0.100; backup sync daemon on eth0, syncid 0"
	if got := redundancyLine(r); got != want {
		t.Errorf("redundancy line:\n got %s\nwant %s", got, want)
	}
	r.Auth = "none"
	if got := advertsLine(r); got != "authentication none (any host on the link can forge them: settings.redundancy.auth)" {
		t.Errorf("adverts line: %s", got)
	}
	r.Auth, r.AuthError = "hmac-sha256 enforce, key 2 (keys 1 2), time window 5s", "key 1: key file /k1: no such file"
	r.Families = []server.FamilyStatus{{Family: "ipv4", Dropped: map[string]uint64{"auth_bad_hmac": 3, "not_peer": 1, "bad_ttl": 0}}}
	want = "authentication hmac-sha256 enforce, key 2 (keys 1 2), time window 5s; key files: key 1: key file /k1: no such file; ipv4 dropped: auth_bad_hmac 3, not_peer 1"
	if got := advertsLine(r); got != want {
		t.Errorf("adverts line:\n got %s\nwant %s", got, want)
	}
	rep := &server.ReplicationStatus{Peer: "https://198.18.0.2:3636", Connected: true, InSync: true, PeerRevision: 12}
	if got := replicationLine(rep); got != "from https://198.18.0.2:3636, in sync, peer revision 12, lag 0.0s" {
		t.Errorf("replication line: %s", got)
	}
}
