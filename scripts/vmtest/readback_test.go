//go:build vmtest

package vmtest

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"testing"

	"github.com/moby/ipvs"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/kernel"
)

// TestReadBackAgreesWithMobyIPVS reads the table ipvsctl wrote with two
// independent decoders: ipvsctl's own reader and moby/ipvs.
func TestReadBackAgreesWithMobyIPVS(t *testing.T) {
	l := newLab(t, 2, false)
	l.apply(fmt.Sprintf(`{"services":[
	 {"address":"%s","port":80,"scheduler":"wrr","persistence":30,"persistence_netmask":"255.255.255.0",
	  "servers":[{"address":"198.18.0.11","weight":3,"upper_threshold":9},{"address":"198.18.0.12","forwarding":"tun"}]},
	 {"fwmark":4,"scheduler":"mh","scheduler_flags":["fallback"],"servers":[{"address":"198.18.0.12"}]},
	 {"protocol":"udp","address":"%s","port":53,"scheduler":"sh","one_packet":true,"servers":[{"address":"2001:db8::11"}]}]}`, vip, vip6))

	var mine, theirs []string
	for _, s := range kernelTable(t, l.dir).Services {
		for _, d := range s.Dests {
			mine = append(mine, fmt.Sprintf("%d/%d/%s/%d/%d %s flags=%#x timeout=%d -> %s w=%d fwd=%d x=%d y=%d",
				s.Key.Family, s.Key.Protocol, s.Key.Addr, s.Key.Port, s.Key.FWMark, s.Scheduler, s.Flags, s.Timeout,
				d.Key, d.Weight, d.Forward, d.UpperThreshold, d.LowerThreshold))
		}
	}
	h, err := ipvs.New("/run/netns/" + l.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	svcs, err := h.GetServices()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs {
		dests, err := h.GetDestinations(s)
		if err != nil {
			t.Fatal(err)
		}
		addr := ""
		if s.FWMark == 0 {
			a, _ := netip.AddrFromSlice(s.Address)
			addr = a.Unmap().String()
		} else {
			addr = "invalid IP"
		}
		for _, d := range dests {
			a, _ := netip.AddrFromSlice(d.Address)
			theirs = append(theirs, fmt.Sprintf("%d/%d/%s/%d/%d %s flags=%#x timeout=%d -> %s w=%d fwd=%d x=%d y=%d",
				s.AddressFamily, s.Protocol, addr, s.Port, s.FWMark, s.SchedName, s.Flags&^0x2, s.Timeout,
				netip.AddrPortFrom(a.Unmap(), d.Port), d.Weight, d.ConnectionFlags&7, d.UpperThreshold, d.LowerThreshold))
		}
	}
	sort.Strings(mine)
	sort.Strings(theirs)
	if strings.Join(mine, "\n") != strings.Join(theirs, "\n") || len(mine) != 4 {
		t.Fatalf("ipvsctl read:\n%s\nmoby/ipvs read:\n%s", strings.Join(mine, "\n"), strings.Join(theirs, "\n"))
	}
	t.Logf("both read:\n%s", strings.Join(mine, "\n"))
}

// TestLargeTableReadBack reads a table whose real servers take many netlink
// datagrams (one service's 1,500 real servers span several 32 KB replies) and
// many services (read over several sockets in parallel): every real server
// and weight ipvsctl reads agrees with ipvsadm -Sn, and a second apply of the
// same document changes nothing.
func TestLargeTableReadBack(t *testing.T) {
	l := newLab(t, 0, false)
	var b strings.Builder
	b.WriteString(`{"services":[{"address":"198.18.0.100","port":80,"forwarding":"nat","servers":[`)
	for j := range 1500 {
		if j > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"address":"198.18.%d.%d","weight":%d}`, 1+j/250, 1+j%250, 1+j%97)
	}
	b.WriteString(`]}`)
	for i := range 300 {
		fmt.Fprintf(&b, `,{"address":"198.18.100.%d","port":%d,"forwarding":"nat","servers":[{"address":"198.18.0.11","weight":%d},{"address":"198.18.0.12"}]}`, 1+i%250, 80+i/250, i%7)
	}
	b.WriteString(`]}`)
	l.apply(b.String())

	mine := map[string]uint32{}
	for _, s := range kernelTable(t, l.dir).Services {
		for _, d := range s.Dests {
			mine[s.Key.String()+" -> "+d.Key.String()] = d.Weight
		}
	}
	theirs := map[string]uint32{}
	for _, line := range strings.Split(l.saved(), "\n") {
		var svc, dst string
		var w uint32
		if _, err := fmt.Sscanf(line, "-a -t %s -r %s -m -w %d", &svc, &dst, &w); err == nil {
			theirs["-t "+svc+" -> "+dst] = w
		}
	}
	if len(theirs) != 2100 {
		t.Fatalf("ipvsadm -Sn lists %d real servers, want 2100", len(theirs))
	}
	if len(mine) != len(theirs) {
		t.Fatalf("ipvsctl read %d real servers, ipvsadm -Sn %d", len(mine), len(theirs))
	}
	for k, w := range theirs {
		if got, ok := mine[k]; !ok || got != w {
			t.Fatalf("%s: ipvsctl read weight %d (present %v), ipvsadm -Sn %d", k, got, ok, w)
		}
	}
	if out := l.apply(b.String()); !strings.Contains(out, "0 changes applied, 0 failed") {
		t.Fatalf("a second apply changed things:\n%s", out[max(0, len(out)-300):])
	}
}

// kernelTable is the table ipvsctl's own reader finds in namespace ns.
func kernelTable(t *testing.T, ns string) *ipvsmgr.Table {
	t.Helper()
	var tbl *ipvsmgr.Table
	inNS(t, ns, func() {
		drv, err := kernel.Open(kernel.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer drv.Close()
		if tbl, err = drv.Table(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	return tbl
}
