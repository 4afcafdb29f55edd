package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp/bgptest"
	"github.com/ipvsctl/ipvsctl/server"
)

// TestDaemonReadsTheBGPKeyFromItsFile runs the daemon against a router
// whose session needs a TCP MD5 key: the key in the peer's password_file
// gets the VIP announced; the file gone, the status names the field and
// the file (never the key) and the running session stays; a wrong key
// written in its place (a rotation) gives new sessions that the router
// refuses, and the right one back brings the session back.
func TestDaemonReadsTheBGPKeyFromItsFile(t *testing.T) {
	const key = "md5-daemon-key-9"
	r := bgptest.StartRouterWithKey(t, key)
	core, d, _, _ := daemonOnFake(t)
	d.Interval, d.Poll, d.Snapshot = 50*time.Millisecond, 10*time.Millisecond, 50*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a := server.Actor{Name: "t", Via: "test"}
	rid, src := "198.18.0.1", "127.0.0.1"
	if _, err := core.SetNode(ctx, a, server.NodePatch{RouterID: &rid, BGPSource: &src}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "peer.key")
	writeKey := func(k string) {
		t.Helper()
		tmp := file + ".new"
		if err := os.WriteFile(tmp, []byte(k+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	writeKey(key)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	defer func() { stop(); <-done }()
	st := &ipvsmgr.State{
		Settings: ipvsmgr.Settings{Network: "dr", BGP: &ipvsmgr.BGP{ASN: 65001, Peers: []ipvsmgr.BGPPeer{{Address: "127.0.0.2", Port: r.Port, ASN: 65000, HoldTime: 9, PasswordFile: file}}}},
		Services: []ipvsmgr.Service{{Name: "web", Protocol: "tcp", Address: "198.18.0.100", Port: 80, Scheduler: "mh",
			Servers: []ipvsmgr.Server{{Name: "r1", Address: "198.18.1.11"}}}},
	}
	if _, err := applyState(ctx, core, a, st, "test"); err != nil {
		t.Fatal(err)
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if ctx.Err() != nil {
				t.Fatalf("timed out waiting for %s; status %+v", what, core.BGPStatus())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	routed := func() bool { _, _, ok := r.Route(t, "198.18.0.100/32"); return ok }
	wait("the VIP announced over the signed session", routed)

	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	wait("the status to name the missing file", func() bool {
		s := core.BGPStatus()
		return s != nil && strings.Contains(s.Error, "settings.bgp.peers[0].password_file: "+file+": no such file")
	})
	if s := core.BGPStatus(); strings.Contains(s.Error, key) {
		t.Errorf("the status shows the key: %q", s.Error)
	}
	if !r.Established(t) || !routed() {
		t.Error("the session went with the file: a running session keeps the key it was read with")
	}

	writeKey("md5-wrong-key-0")
	wait("the router to lose the session (new sessions signed with the wrong key)", func() bool { return !r.Established(t) })
	writeKey(key)
	wait("the session and the VIP back with the right key", func() bool { return r.Established(t) && routed() })
}
