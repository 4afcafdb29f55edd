package daemon

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/events"
)

// checkedDirector is a daemon told of one service of n tcp-checked real
// servers, its checks not started: what the followers of the event log read
// while the first results come in.
func checkedDirector(t *testing.T, n int) *Daemon {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	st := testStore(t, ctx)
	d := New(server.New(server.Config{Store: st}), st, nil)
	var b strings.Builder
	b.WriteString(`{"services":[{"name":"s","address":"198.18.0.100","port":80,"check":{"type":"tcp","interval":1},"servers":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"address":"198.19.%d.%d"}`, i/250, 1+i%250)
	}
	b.WriteString("]}]}")
	state, err := ipvsmgr.DecodeState(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	desired, err := ipvsmgr.Compile(state)
	if err != nil {
		t.Fatal(err)
	}
	d.sk.offer(1, desired, false)
	return d
}

// A health event costs the notify programs and the alerts nothing when the
// state has none of them: they read its settings, not a copy of every
// checked server's health (which 1,000 servers coming up at start had made
// 2,000 times, 200 kB each).
func TestHealthEventFollowersCopyNoHealth(t *testing.T) {
	d := checkedDirector(t, 1000)
	e := server.Event{Type: events.ServerUp, Subject: d.sk.desired.Checks[500].Ref.String()}
	n := &notifier{d: d}
	a := &alerter{d: d}
	n.programsFor(e) // the subject index, made once per state
	for name, f := range map[string]func(){
		"notify programs":  func() { n.programsFor(e) },
		"alerts":           func() { a.take(e) },
		"alert deliveries": func() { a.deliveries() },
	} {
		if got := testing.AllocsPerRun(20, f); got != 0 {
			t.Errorf("%s: %.0f allocations per health event on 1,000 checked servers, want 0", name, got)
		}
	}
}
