package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/formats"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// An ldirectord.cf with quiescent = no, a fallback and a fallbackcommand,
// imported and run by the daemon with real connect checks on loopback: a
// server that fails is removed from the kernel (not set to weight 0); when
// none is left the fallback is in and the command (a real script) runs with
// ldirectord's arguments, "start VIP:PORT tcp"; when one is back, "stop".
func TestDaemonRunsLdirectordFallbackCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "ipvsctl.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out := filepath.Join(dir, "fallback.log")
	script := filepath.Join(dir, "fallback.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$*\" >> "+out+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b1, b2 := newBackend(t), newBackend(t)
	cf := fmt.Sprintf(`quiescent=no
failurecount=1
fallbackcommand=%s

virtual=198.18.0.100:80
	real=%s masq
	real=%s masq
	checktype=connect
	fallback=198.18.0.50:80 masq
`, script, b1.addr, b2.addr)
	state, err := formats.Import(formats.FormatLdirectord, strings.NewReader(cf))
	if err != nil {
		t.Fatal(err)
	}
	c := state.Services[0].Check
	if c == nil || c.OnFailure != "remove" {
		t.Fatalf("quiescent=no: check %+v, want on_failure remove", c)
	}
	c.Interval, c.Timeout = 0.1, 0.5 // ldirectord's whole seconds are slow for a test

	k := fakekernel.New()
	core := server.New(server.Config{Store: st, OpenKernel: openFake(k, nil)})
	d := New(core, st, slog.New(slog.DiscardHandler))
	d.Interval, d.Poll = time.Hour, 50*time.Millisecond
	d.QuorumTimeout = 5 * time.Second
	dctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(dctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	if _, err := applyState(ctx, core, server.Actor{Name: "t", Via: "test"}, state, "test"); err != nil {
		t.Fatal(err)
	}
	dests := func() string {
		tbl, _ := k.Table(ctx)
		var ds []string
		for _, s := range tbl.Services {
			for _, dst := range s.Dests {
				ds = append(ds, fmt.Sprintf("%s=%d", dst.Key, dst.Weight))
			}
		}
		slices.Sort(ds)
		return strings.Join(ds, " ")
	}
	lines := func() string {
		b, _ := os.ReadFile(out)
		return string(b)
	}
	waitFor := func(what string, f func() bool) {
		t.Helper()
		for ctx.Err() == nil {
			if f() {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("timed out waiting for %s: kernel %q, fallbackcommand runs %q", what, dests(), lines())
	}
	both := []string{b1.addr + "=1", b2.addr + "=1"}
	slices.Sort(both)
	waitFor("both real servers in", func() bool { return dests() == strings.Join(both, " ") })
	b1.close()
	waitFor("the failed server removed, not quiesced", func() bool { return dests() == b2.addr+"=1" })
	b2.close()
	waitFor("the fallback in and start run", func() bool {
		return dests() == "198.18.0.50:80=1" && lines() == "start 198.18.0.100:80 tcp\n"
	})
	b2.open()
	waitFor("the fallback out and stop run", func() bool {
		return dests() == b2.addr+"=1" && lines() == "start 198.18.0.100:80 tcp\nstop 198.18.0.100:80 tcp\n"
	})
}
