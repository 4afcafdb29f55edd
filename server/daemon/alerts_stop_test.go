package daemon

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/server/events"
)

// mailReceiver is a mail relay on loopback that takes every message and
// keeps their subjects in the order it took them.
type mailReceiver struct {
	ln       net.Listener
	mu       sync.Mutex
	subjects []string
}

func newMailReceiver(t *testing.T) *mailReceiver {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &mailReceiver{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go m.serve(c)
		}
	}()
	return m
}

func (m *mailReceiver) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	tp := textproto.NewConn(c)
	tp.PrintfLine("220 relay.example.test ESMTP")
	for {
		line, err := tp.ReadLine()
		if err != nil {
			return
		}
		switch verb := strings.ToUpper(strings.SplitN(line, " ", 2)[0]); verb {
		case "DATA":
			tp.PrintfLine("354 go ahead")
			msg, err := textproto.NewReader(bufio.NewReader(tp.DotReader())).ReadMIMEHeader()
			if err != nil {
				return
			}
			m.mu.Lock()
			m.subjects = append(m.subjects, msg.Get("Subject"))
			m.mu.Unlock()
			tp.PrintfLine("250 taken")
		case "QUIT":
			tp.PrintfLine("221 bye")
			return
		default:
			tp.PrintfLine("250 ok")
		}
	}
}

func (m *mailReceiver) got() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.subjects...)
}

// What keepalived mails as it stops (notify_shutdown in vrrp_notify.c):
// the instance's "Stopping" and then its sync group's; a stopping daemon
// sends them, in that order, before Run returns (within the alerts' grace,
// here long enough for a loaded machine: the bound itself is the next test's).
// keepalived's checker mails at its stop (ipwrapper.c's "=> Shutting down
// <=") come only with omega and as it empties the kernel's table, which
// ipvsctl leaves as it is: none is sent, as keepalived sends none with
// --dont-release-ipvs.
func TestAlertMailsAtStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	relay := newMailReceiver(t)
	host, port, _ := net.SplitHostPort(relay.ln.Addr().String())
	var evs *events.Log
	r := newAlertRig(t, ctx, fmt.Sprintf(`{"settings": {
    "redundancy": {"vrid": 51, "interface": "lo", "instance": "VI_WEB", "sync_group": {"name": "VG_WEB"}},
    "alerts": {"smtp": {"server": %q, "port": %s, "to": ["ops@example.test"], "router_id": "LB1", "alert": true}}},
  "services": [{"name": "web", "address": "198.18.0.100", "port": 80, "forwarding": "nat",
    "servers": [{"name": "r1", "address": "198.18.1.11", "port": 80}]}]}`, host, port),
		func(d *Daemon) {
			d.AlertGrace = time.Minute
			// As the VRRP runner does: it resigns when the daemon stops.
			d.AddRunner(func(ctx context.Context) {
				<-ctx.Done()
				evs.Publish(events.Event{Type: events.VRRPState, Subject: "vrrp/ipv4",
					Fields: map[string]string{"family": "ipv4", "state": "stop", "priority": "150"}})
			})
		})
	evs = r.evs
	r.publish(events.VRRPState, "vrrp/ipv4", map[string]string{"family": "ipv4", "state": "master", "priority": "150"})
	waitUntil(t, ctx, "the MASTER mails", func() bool { return len(relay.got()) == 2 })
	r.stop()
	want := []string{"[LB1] VRRP Instance VI_WEB - Entering MASTER state", "[LB1] VRRP Group VG_WEB - Entering MASTER state",
		"[LB1] VRRP Instance VI_WEB - Stopping", "[LB1] VRRP Group VG_WEB - Stopping"}
	if got := relay.got(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the relay took %q once the daemon stopped, want %q", got, want)
	}
	if n := r.count("smtp sent"); n != 4 {
		t.Errorf("%d mails counted sent, want 4", n)
	}
}

// The grace bounds the stop: a relay that takes the connection and never
// answers holds the stop's mail until the grace ends, not for the mail's
// connect_timeout (30 s here), and the mail is counted failed.
func TestAlertGraceBoundsTheStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // never answered
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}()
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	r := newAlertRig(t, ctx, fmt.Sprintf(`{"settings": {
    "redundancy": {"vrid": 51, "interface": "lo", "instance": "VI_WEB"},
    "alerts": {"smtp": {"server": %q, "port": %s, "to": ["ops@example.test"], "alert": true, "connect_timeout": 30}}},
  "services": [{"name": "web", "address": "198.18.0.100", "port": 80, "forwarding": "nat",
    "servers": [{"name": "r1", "address": "198.18.1.11", "port": 80}]}]}`, host, port),
		func(d *Daemon) { d.AlertGrace = 200 * time.Millisecond })
	r.publish(events.VRRPState, "vrrp/ipv4", map[string]string{"family": "ipv4", "state": "master", "priority": "150"})
	waitUntil(t, ctx, "the relay's connection", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(held) > 0
	})
	stopped := time.Now()
	r.stop()
	if took := time.Since(stopped); took >= 30*time.Second {
		t.Errorf("the stop took %v: the mail's connect_timeout, not the grace, ended it", took)
	}
	if n := r.count("smtp failed"); n != 1 {
		t.Errorf("%d mails counted failed, want 1", n)
	}
}
