package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// backend is a loopback listener a real tcp check connects to, closed and
// opened again on its port.
type backend struct {
	t    *testing.T
	addr string
	mu   sync.Mutex
	ln   net.Listener
}

func newBackend(t *testing.T) *backend {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{t: t, addr: ln.Addr().String()}
	b.serve(ln)
	t.Cleanup(b.close)
	return b
}

func (b *backend) serve(ln net.Listener) {
	b.mu.Lock()
	b.ln = ln
	b.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
}

func (b *backend) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ln != nil {
		b.ln.Close()
		b.ln = nil
	}
}

func (b *backend) open() {
	b.t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the port was ours a moment ago
		if ln, err = net.Listen("tcp", b.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		b.t.Fatalf("listen again on %s: %v", b.addr, err)
	}
	b.serve(ln)
}

// The daemon runs a service's quorum_down program (a real shell script)
// when real tcp checks see its servers go below the quorum, and quorum_up
// when they are back, as keepalived: with quorum 2 and hysteresis 1 the
// quorum is lost only below 1 server up and regained at 3; nothing runs at
// start-up (the quorum starts held), and each run's exit status is reported.
func TestDaemonRunsQuorumProgramsOnTheChange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "ipvsctl.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out := filepath.Join(dir, "quorum.log")
	script := filepath.Join(dir, "notify.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$1 $2\" >> "+out+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	bs := []*backend{newBackend(t), newBackend(t), newBackend(t)}
	var servers []string
	for i, b := range bs {
		host, port, _ := net.SplitHostPort(b.addr)
		servers = append(servers, fmt.Sprintf(`{"name":"r%d","address":%q,"port":%s}`, i+1, host, port))
	}
	doc := fmt.Sprintf(`{"services": [{"name": "web", "address": "198.18.0.100", "port": 80, "forwarding": "nat",
  "check": {"type": "tcp", "interval": 0.1, "timeout": 0.5, "rise": 1, "fall": 1, "on_failure": "remove"},
  "quorum": 2, "hysteresis": 1,
  "quorum_up": [%q, "up", "web"], "quorum_down": [%q, "down", "web"],
  "servers": [%s]}]}`, script, script, strings.Join(servers, ","))

	k := fakekernel.New()
	core := server.New(server.Config{Store: st, OpenKernel: openFake(k, nil)})
	d := New(core, st, slog.New(slog.DiscardHandler))
	d.Interval, d.Poll = time.Hour, 50*time.Millisecond
	d.QuorumTimeout = 5 * time.Second
	var mu sync.Mutex
	var runs []QuorumRun
	d.OnQuorumRun(func(r QuorumRun) {
		mu.Lock()
		runs = append(runs, r)
		mu.Unlock()
	})
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
	inKernel := func() int {
		tbl, _ := k.Table(ctx)
		n := 0
		for _, s := range tbl.Services {
			n += len(s.Dests)
		}
		return n
	}
	var lines func() string
	waitFor := func(what string, f func() bool) {
		t.Helper()
		for ctx.Err() == nil {
			if f() {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("timed out waiting for %s (the programs wrote %q; %d in the kernel)", what, lines(), inKernel())
	}
	lines = func() string {
		b, _ := os.ReadFile(out)
		return string(b)
	}
	waitFor("the three servers in after their first pass", func() bool { return inKernel() == 3 })
	// The daemon decides a service's side once all its servers have a
	// health, in its loop: had two gone before that, it would start below
	// its quorum (no program: no sorry server) and the third's loss be no change.
	waitFor("the quorum decided, held", func() bool {
		d.quorum.mu.Lock()
		defer d.quorum.mu.Unlock()
		for _, held := range d.quorum.held {
			return held
		}
		return false
	})
	// Two go: 1 up is still quorum-hysteresis; nothing runs.
	bs[0].close()
	bs[1].close()
	waitFor("two servers out", func() bool { return inKernel() == 1 })
	time.Sleep(300 * time.Millisecond) // three check intervals: a wrong run would show
	if got := lines(); got != "" {
		t.Fatalf("a program ran at start-up or above quorum-hysteresis: %q", got)
	}
	bs[2].close()
	waitFor("quorum_down run once none is up", func() bool { return lines() == "down web\n" })
	// Two back: below quorum+hysteresis, still lost.
	bs[0].open()
	bs[1].open()
	waitFor("two servers back", func() bool { return inKernel() == 2 })
	time.Sleep(300 * time.Millisecond)
	if got := lines(); got != "down web\n" {
		t.Fatalf("with 2 of quorum 2 + hysteresis 1 up: %q", got)
	}
	bs[2].open()
	waitFor("quorum_up run at quorum+hysteresis", func() bool { return lines() == "down web\nup web\n" })
	waitFor("both runs reported", func() bool { mu.Lock(); defer mu.Unlock(); return len(runs) == 2 })
	mu.Lock()
	defer mu.Unlock()
	for i, want := range []bool{false, true} {
		r := runs[i]
		if r.Up != want || r.ExitCode != 0 || r.Err != "" || r.AtStart || r.Quorum != 2 || r.Hysteresis != 1 {
			t.Errorf("run %d = %+v, want up=%v exit 0", i, r, want)
		}
	}
	if runs[0].Healthy != 0 || runs[1].Healthy != 3 {
		t.Errorf("healthy at the runs: %d, %d; want 0, 3", runs[0].Healthy, runs[1].Healthy)
	}
}

// A quorum program that hangs is killed at its timeout and reported so,
// and the reconciles go on meanwhile: servers coming back are in the kernel
// while it still runs.
func TestQuorumProgramTimeoutDoesNotBlock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "ipvsctl.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	started := filepath.Join(dir, "started")
	doc := fmt.Sprintf(`{"services": [{"name": "web", "address": "198.18.0.100", "port": 80,
  "check": {"type": "tcp", "interval": 0.1, "timeout": 0.1, "rise": 1, "fall": 1, "on_failure": "remove"},
  "quorum_down": ["/bin/sh", "-c", "touch %s; sleep 20"],
  "servers": [{"name": "r1", "address": "198.18.0.11"}]}]}`, started)
	k := fakekernel.New()
	checks := &fakeChecks{fail: map[string]string{}}
	core := server.New(server.Config{Store: st, OpenKernel: openFake(k, nil)})
	d := New(core, st, slog.New(slog.DiscardHandler))
	d.Interval, d.Poll = time.Hour, time.Hour
	d.Check = checks.run
	d.QuorumTimeout = 2 * time.Second
	runs := make(chan QuorumRun, 4)
	d.OnQuorumRun(func(r QuorumRun) { runs <- r })
	dctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(dctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	r := &healthRig{t: t, ctx: ctx, k: k}
	state, err := ipvsmgr.DecodeState(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := applyState(ctx, core, server.Actor{Name: "t", Via: "test"}, state, "test"); err != nil {
		t.Fatal(err)
	}
	r.waitWeights("r1 in", map[string]uint32{"198.18.0.11": 1})
	checks.set("198.18.0.11:80", "connection refused")
	r.waitWeights("r1 out", map[string]uint32{})
	for {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("quorum_down never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	checks.set("198.18.0.11:80", "")
	r.waitWeights("r1 back while quorum_down still runs", map[string]uint32{"198.18.0.11": 1})
	if len(runs) != 0 {
		t.Fatal("the run ended before the server came back: the test proves nothing")
	}
	select {
	case run := <-runs:
		if run.Up || run.Err != "timed out after 2s" || run.ExitCode != -1 {
			t.Errorf("run %+v, want quorum_down timed out", run)
		}
		if el := time.Since(start); el > 10*time.Second {
			t.Errorf("killed after %v", el)
		}
	case <-ctx.Done():
		t.Fatal("the hung program was never reported")
	}
}
