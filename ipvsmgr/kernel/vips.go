package kernel

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// VIPs are /32 or /128 addresses on director interfaces.

func vipNet(v ipvsmgr.VIP) *netlink.Addr {
	bits := 32
	if v.Addr.Is6() {
		bits = 128
	}
	a := &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(v.Addr.AsSlice()), Mask: net.CIDRMask(bits, bits)}}
	if v.Addr.Is6() {
		a.Flags = unix.IFA_F_NODAD // usable at once, no tentative state
	}
	return a
}

func hasAddr(link netlink.Link, v ipvsmgr.VIP) (bool, error) {
	fam := netlink.FAMILY_V4
	if v.Addr.Is6() {
		fam = netlink.FAMILY_V6
	}
	addrs, err := netlink.AddrList(link, fam)
	if err != nil {
		return false, fmt.Errorf("list addresses of %s: %w", v.Interface, err)
	}
	want := net.IP(v.Addr.AsSlice())
	for _, a := range addrs {
		if a.IP.Equal(want) {
			return true, nil
		}
	}
	return false, nil
}

// addVIP adds v unless its interface already has the address.
func addVIP(v ipvsmgr.VIP) error {
	link, err := netlink.LinkByName(v.Interface)
	if err != nil {
		return fmt.Errorf("interface %q: %w", v.Interface, err)
	}
	if ok, err := hasAddr(link, v); err != nil || ok {
		return err
	}
	if err := netlink.AddrAdd(link, vipNet(v)); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("add %s: %w", v, err)
	}
	return nil
}

// removeVIP removes v; an address already gone is not an error.
func removeVIP(v ipvsmgr.VIP) error {
	link, err := netlink.LinkByName(v.Interface)
	if err != nil {
		if isNotFound(err) {
			return nil
		}
		return fmt.Errorf("interface %q: %w", v.Interface, err)
	}
	if ok, err := hasAddr(link, v); err != nil || !ok {
		return err
	}
	if err := netlink.AddrDel(link, vipNet(v)); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
		return fmt.Errorf("remove %s: %w", v, err)
	}
	return nil
}

// hasVIP reports whether v's interface has its address; a missing interface has none.
func hasVIP(v ipvsmgr.VIP) (bool, error) {
	link, err := netlink.LinkByName(v.Interface)
	if err != nil {
		if isNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("interface %q: %w", v.Interface, err)
	}
	return hasAddr(link, v)
}
