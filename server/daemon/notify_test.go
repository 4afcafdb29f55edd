package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/events"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// A real server's notify_up runs when its first check passes and when it
// comes back, its notify_down when it goes, each once, in order; a VRRP
// change runs the state's program and then notify with keepalived's four
// arguments, and then its sync group's (notify with GROUP NAME STATE 0).
func TestDaemonRunsNotifyPrograms(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "ipvsctl.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out := filepath.Join(dir, "notify.log")
	script := filepath.Join(dir, "notify.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$*\" >> "+out+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b := newBackend(t)
	host, port, _ := net.SplitHostPort(b.addr)
	doc := fmt.Sprintf(`{"settings": {"redundancy": {"vrid": 51, "interface": "lo", "instance": "VI_WEB",
    "notify_master": [%[1]q, "master"], "notify_backup": [%[1]q, "backup"], "notify": [%[1]q, "notify"],
    "sync_group": {"name": "VG_WEB", "notify_master": [%[1]q, "group-master"], "notify": [%[1]q, "group-notify"]}}},
  "services": [{"name": "web", "address": "198.18.0.100", "port": 80, "forwarding": "nat",
  "check": {"type": "tcp", "interval": 0.1, "timeout": 0.5, "rise": 1, "fall": 1, "on_failure": "remove"},
  "servers": [{"name": "r1", "address": %[2]q, "port": %[3]s, "notify_up": [%[1]q, "up", "r1"], "notify_down": [%[1]q, "down", "r1"]}]}]}`,
		script, host, port)

	k := fakekernel.New()
	evs, err := events.New(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	core := server.New(server.Config{Store: st, Events: evs, OpenKernel: openFake(k, nil)})
	d := New(core, st, slog.New(slog.DiscardHandler))
	d.Interval, d.Poll = time.Hour, 50*time.Millisecond
	d.NotifyTimeout = 5 * time.Second
	dctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(dctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	state, err := ipvsmgr.DecodeState(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := applyState(ctx, core, server.Actor{Name: "t", Via: "test"}, state, "test"); err != nil {
		t.Fatal(err)
	}
	lines := func() string {
		b, _ := os.ReadFile(out)
		return string(b)
	}
	waitFor := func(what, want string) {
		t.Helper()
		for ctx.Err() == nil {
			if lines() == want {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("timed out waiting for %s: the programs wrote %q, want %q", what, lines(), want)
	}
	waitFor("notify_up at the first pass", "up r1\n")
	b.close()
	waitFor("notify_down", "up r1\ndown r1\n")
	b.open()
	waitFor("notify_up when it is back", "up r1\ndown r1\nup r1\n")

	// The VRRP runner publishes its changes; the notifier runs keepalived's
	// programs for them (this test's daemon speaks no VRRP).
	evs.Publish(events.Event{Type: events.VRRPState, Subject: "vrrp/ipv4", Fields: map[string]string{"family": "ipv4", "state": "master", "priority": "150"}})
	evs.Publish(events.Event{Type: events.VRRPState, Subject: "vrrp/ipv4", Fields: map[string]string{"family": "ipv4", "state": "backup", "priority": "150"}})
	waitFor("notify_master, notify, the group's notify_master and notify, notify_backup, notify, the group's notify in order",
		"up r1\ndown r1\nup r1\nmaster\nnotify INSTANCE VI_WEB MASTER 150\ngroup-master\ngroup-notify GROUP VG_WEB MASTER 0\n"+
			"backup\nnotify INSTANCE VI_WEB BACKUP 150\ngroup-notify GROUP VG_WEB BACKUP 0\n")
	time.Sleep(300 * time.Millisecond) // three check intervals: a repeated run would show
	if got := lines(); strings.Count(got, "\n") != 10 {
		t.Errorf("a program ran again: %q", got)
	}
}
