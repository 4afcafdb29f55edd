package main

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestNodeShowServedFingerprint: node show prints the fingerprint of the
// certificate serve really shows. Run with --tls-cert, serve shows that one,
// not the self-signed one beside the database, and node show says so while
// serve runs and after it has stopped (from what serve recorded).
func TestNodeShowServedFingerprint(t *testing.T) {
	k := fakekernel.New()
	dir := t.TempDir()
	db := filepath.Join(dir, "ipvsctl.db")
	show := func() (server.NodeView, string) {
		t.Helper()
		r := runCLI(t, k, "--db", db, "node", "show")
		j := runCLI(t, k, "--db", db, "node", "show", "--json")
		var v server.NodeView
		if r.code != 0 || j.code != 0 {
			t.Fatalf("node show: exit %d, %d\n%s%s", r.code, j.code, r.stderr, j.stderr)
		}
		if err := json.Unmarshal([]byte(j.stdout), &v); err != nil {
			t.Fatal(err)
		}
		return v, r.stdout
	}
	selfSigned, _ := trust.IdentityPaths(dir)
	v, out := show()
	if own := mustFingerprint(t, selfSigned); v.Fingerprint != own || v.IdentityFrom != server.IdentitySelfSigned ||
		!strings.Contains(out, "fingerprint: "+own+"\n") || !strings.Contains(out, "certificate: "+selfSigned+" (self-signed; serve has not started yet") {
		t.Fatalf("before serve: want the self-signed %s, said so:\n%s", own, out)
	}

	cert, key, err := trust.SelfSigned(t.TempDir(), "director-a.example", nil)
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	stop := startServe(t, "--db", db, "serve", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--tls-cert", cert, "--tls-key", key, "--interval", "1h")
	var served string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		c, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			served = trust.Fingerprint(c.ConnectionState().PeerCertificates[0].Raw)
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve --tls-cert does not answer TLS: %v", err)
		}
	}
	if served != mustFingerprint(t, cert) || served == mustFingerprint(t, selfSigned) {
		t.Fatalf("serve shows %s; --tls-cert is %s, the self-signed one %s", served, mustFingerprint(t, cert), mustFingerprint(t, selfSigned))
	}
	for deadline := time.Now().Add(30 * time.Second); v.IdentityFrom != server.IdentityServed; time.Sleep(100 * time.Millisecond) {
		if v, out = show(); time.Now().After(deadline) {
			t.Fatalf("node show never reached the daemon:\n%s", out)
		}
	}
	if v.Fingerprint != served || !strings.Contains(out, "fingerprint: "+served+"\n") || !strings.Contains(out, "certificate: "+cert+" (the one this daemon serves)") {
		t.Errorf("node show while serve runs: want %s of %s\n%s", served, cert, out)
	}
	stop()
	if r := runCLI(t, k, "--db", db, "node", "set", "--priority", "120"); r.code != 0 {
		t.Fatalf("node set: exit %d\n%s", r.code, r.stderr)
	}
	v, out = show()
	if v.Fingerprint != served || v.IdentityFrom != server.IdentityLastServe || !strings.Contains(out, "fingerprint: "+served+"\n") ||
		!strings.Contains(out, "certificate: "+cert+" (the one serve last started with") {
		t.Errorf("node show without the daemon: want %s, the fingerprint serve showed\n%s", served, out)
	}

	// A recorded certificate that is gone: no fingerprint, and how to get one.
	if err := os.Remove(cert); err != nil {
		t.Fatal(err)
	}
	v, out = show()
	if v.Fingerprint != "" || v.FingerprintError == "" || !strings.Contains(out, "fingerprint: unknown (") ||
		!strings.Contains(out, "run node show while serve runs, or openssl x509 -noout -fingerprint -sha256 -in "+cert) {
		t.Errorf("node show with serve's certificate gone:\n%s", out)
	}
}
