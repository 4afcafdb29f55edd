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
	inNS(t, l.dir, func() {
		drv, err := kernel.Open(kernel.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer drv.Close()
		tbl, err := drv.Table(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range tbl.Services {
			for _, d := range s.Dests {
				mine = append(mine, fmt.Sprintf("%d/%d/%s/%d/%d %s flags=%#x timeout=%d -> %s w=%d fwd=%d x=%d y=%d",
					s.Key.Family, s.Key.Protocol, s.Key.Addr, s.Key.Port, s.Key.FWMark, s.Scheduler, s.Flags, s.Timeout,
					d.Key, d.Weight, d.Forward, d.UpperThreshold, d.LowerThreshold))
			}
		}
	})
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
