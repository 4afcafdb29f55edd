package vrrp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
)

// flakyConn is a PacketConn whose sends fail with ENETDOWN for the first
// downFor calls, as a socket left over from a link flap does.
type flakyConn struct {
	name    string
	mu      sync.Mutex
	downFor int
	sent    [][]byte
	closed  bool
}

func (c *flakyConn) WriteTo(b []byte, _ net.Addr) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	if c.downFor > 0 {
		c.downFor--
		return 0, &net.OpError{Op: "write", Net: "packet", Err: os.NewSyscallError("sendto", syscall.ENETDOWN)}
	}
	c.sent = append(c.sent, append([]byte(nil), b...))
	return len(b), nil
}

func (c *flakyConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}

func (c *flakyConn) ReadFrom([]byte) (int, net.Addr, error) { return 0, nil, errors.New("not read") }
func (c *flakyConn) LocalAddr() net.Addr                    { return nil }
func (c *flakyConn) SetDeadline(time.Time) error            { return nil }
func (c *flakyConn) SetReadDeadline(time.Time) error        { return nil }
func (c *flakyConn) SetWriteDeadline(time.Time) error       { return nil }

// fakeLink hands out the flaky conns in order and records what was dialled.
type fakeLink struct {
	conns  []*flakyConn
	dialed []string
}

func (f *fakeLink) dial(ifi *net.Interface) (net.PacketConn, error) {
	if len(f.dialed) == len(f.conns) {
		return nil, fmt.Errorf("socket: %w", syscall.ENODEV)
	}
	c := f.conns[len(f.dialed)]
	f.dialed = append(f.dialed, c.name)
	return c, nil
}

// announced is what each frame sent says: "ARP request VIP from VIP at MAC
// to BROADCAST".
func announced(t *testing.T, frames [][]byte) []string {
	t.Helper()
	var out []string
	for _, b := range frames {
		var f ethernet.Frame
		if err := f.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		var p arp.Packet
		if err := p.UnmarshalBinary(f.Payload); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("ARP %s %s from %s at %s, to %s", p.Operation, p.TargetIP, p.SenderIP, p.SenderHardwareAddr, f.Destination))
	}
	return out
}

func TestAnnouncerRetriesAfterLinkFlap(t *testing.T) {
	mac := net.HardwareAddr{0x02, 0, 0, 0, 0, 1}
	ifi := &net.Interface{Index: 99999, Name: "ipvsctl-test0", HardwareAddr: mac}
	vip := netip.MustParseAddr("198.18.0.100")
	want := "ARP OperationRequest 198.18.0.100 from 198.18.0.100 at 02:00:00:00:00:01, to ff:ff:ff:ff:ff:ff"
	cases := []struct {
		name    string
		conns   []*flakyConn
		dialed  string // sockets opened, in order
		sentOn  string // the socket whose send went out
		wantErr string
	}{
		{name: "the flap's ENETDOWN, reported once: sent again on the same socket",
			conns: []*flakyConn{{name: "first", downFor: 1}}, dialed: "first", sentOn: "first"},
		{name: "a socket that keeps failing: a new one",
			conns: []*flakyConn{{name: "first", downFor: 1000}, {name: "second"}}, dialed: "first second", sentOn: "second"},
		{name: "the link still down: the error, naming the address and the interface",
			conns: []*flakyConn{{name: "first", downFor: 1000}, {name: "second", downFor: 1000}}, dialed: "first second",
			wantErr: "announce 198.18.0.100 on ipvsctl-test0: write packet: sendto: network is down"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			link := &fakeLink{conns: tc.conns}
			l, err := newAnnouncer(ifi, link.dial)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			err = l.Announce([]netip.Addr{vip})
			if got := strings.Join(link.dialed, " "); got != tc.dialed {
				t.Errorf("sockets opened %q, want %q", got, tc.dialed)
			}
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr || !errors.Is(err, syscall.ENETDOWN) {
					t.Fatalf("error %v, want %q wrapping ENETDOWN", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("announcement after the flap: %v", err)
			}
			for _, c := range tc.conns {
				got := announced(t, c.sent)
				if c.name == tc.sentOn {
					if len(got) != 1 || got[0] != want {
						t.Errorf("sent on %s: %q, want [%q]", c.name, got, want)
					}
				} else if len(got) != 0 {
					t.Errorf("sent on %s too: %q", c.name, got)
				}
				if c.name != tc.sentOn && !c.closed {
					t.Errorf("the replaced socket %s was left open", c.name)
				}
			}
			// The next announcement goes out at once on the socket that works.
			if err := l.Announce([]netip.Addr{vip}); err != nil {
				t.Fatalf("second announcement: %v", err)
			}
		})
	}
}
