package vrrp

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
)

var capture = flag.Bool("capture", false, "capture keepalived's adverts into testdata (root, keepalived)")

// capturedAdvert is one advert as a raw socket received it.
type capturedAdvert struct {
	comment  string
	src, dst netip.Addr
	ttl      int
	payload  []byte
}

func (c capturedAdvert) String() string {
	return fmt.Sprintf("# %s\nsrc %s\ndst %s\nttl %d\n%s\n", c.comment, c.src, c.dst, c.ttl, hex.EncodeToString(c.payload))
}

func readCaptured(t testing.TB, name string) capturedAdvert {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var c capturedAdvert
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		key, val, _ := strings.Cut(line, " ")
		switch {
		case strings.HasPrefix(line, "#"):
			c.comment = strings.TrimSpace(strings.TrimPrefix(line, "#"))
		case key == "src":
			c.src = netip.MustParseAddr(val)
		case key == "dst":
			c.dst = netip.MustParseAddr(val)
		case key == "ttl":
			c.ttl, _ = strconv.Atoi(val)
		case line != "":
			if c.payload, err = hex.DecodeString(line); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
	}
	return c
}

const (
	captureV4Instance = `vrrp_instance V4 {
  state MASTER
  interface vrrp0
  virtual_router_id 51
  priority 150
  advert_int 0.5
  virtual_ipaddress {
    198.18.0.100/32
    198.18.0.101/32
  }
}
`
	captureV6Instance = `vrrp_instance V6 {
  state MASTER
  interface vrrp0
  virtual_router_id 52
  priority 200
  advert_int 0.25
  virtual_ipaddress {
    2001:db8::100/128
    2001:db8::101/128
  }
}
`
)

// TestCaptureKeepalivedAdverts (with -capture) runs keepalived in one
// namespace and saves the first IPv4 and IPv6 adverts a raw socket in the
// other namespace receives.
func TestCaptureKeepalivedAdverts(t *testing.T) {
	if !*capture {
		testenv.OptIn(t, "run with -capture to refresh testdata from keepalived")
	}
	requireKeepalived(t)
	a, b := vethPair(t)
	var c4 *ipv4.PacketConn
	var c6 *ipv6.PacketConn
	err := inNetns(b.ns, func() error {
		l4, err := net.ListenPacket("ip4:112", "0.0.0.0")
		if err != nil {
			return err
		}
		c4 = ipv4.NewPacketConn(l4)
		l6, err := net.ListenPacket("ip6:112", "::")
		if err != nil {
			return err
		}
		c6 = ipv6.NewPacketConn(l6)
		ifi, err := net.InterfaceByName(b.ifname)
		if err != nil {
			return err
		}
		if err := c4.JoinGroup(ifi, &net.IPAddr{IP: GroupIPv4.AsSlice()}); err != nil {
			return err
		}
		if err := c6.JoinGroup(ifi, &net.IPAddr{IP: GroupIPv6.AsSlice()}); err != nil {
			return err
		}
		if err := c4.SetControlMessage(ipv4.FlagTTL|ipv4.FlagDst, true); err != nil {
			return err
		}
		return c6.SetControlMessage(ipv6.FlagHopLimit|ipv6.FlagDst, true)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c4.Close()
	defer c6.Close()
	startKeepalived(t, a.ns, keepalivedConf(captureV4Instance, captureV6Instance))
	deadline := time.Now().Add(15 * time.Second)
	_ = c4.SetReadDeadline(deadline)
	_ = c6.SetReadDeadline(deadline)
	buf := make([]byte, 1500)
	n, cm4, src, err := c4.ReadFrom(buf)
	if err != nil {
		t.Fatalf("no IPv4 advert from keepalived: %v", err)
	}
	v4 := capturedAdvert{comment: "keepalived v2.2.7 vrrp_version 3: vrid 51 priority 150 advert_int 0.5 VIPs 198.18.0.100 198.18.0.101",
		src: netip.MustParseAddr(src.(*net.IPAddr).IP.String()), dst: netip.MustParseAddr(cm4.Dst.String()), ttl: cm4.TTL, payload: append([]byte(nil), buf[:n]...)}
	var v6 capturedAdvert
	for {
		n, cm6, src, err := c6.ReadFrom(buf)
		if err != nil {
			t.Fatalf("no IPv6 advert from keepalived: %v", err)
		}
		if n < 2 || buf[1] != 52 {
			continue
		}
		v6 = capturedAdvert{comment: "keepalived v2.2.7 vrrp_version 3: vrid 52 priority 200 advert_int 0.25 VIPs 2001:db8::100 2001:db8::101",
			src: netip.MustParseAddr(src.(*net.IPAddr).IP.String()), dst: netip.MustParseAddr(cm6.Dst.String()), ttl: cm6.HopLimit, payload: append([]byte(nil), buf[:n]...)}
		break
	}
	for name, c := range map[string]capturedAdvert{"keepalived-ipv4.txt": v4, "keepalived-ipv6.txt": v6} {
		if err := os.WriteFile(filepath.Join("testdata", name), []byte(c.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s:\n%s", name, c)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal(err)
	}
}
