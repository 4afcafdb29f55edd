package bgp

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
	"testing"
)

// A replica of the kernel's IPVS mh scheduler (net/netfilter/ipvs/ip_vs_mh.c
// on a 64-bit kernel, where hsiphash is SipHash-1-3; Debian's 4093-slot
// table; every weight 1): the evidence for why directors must hold their
// real servers in one kernel list order, checked against flows the VM
// tier recorded (TestBGPECMPDirectorLossAndRejoin logs each flow's client
// port, real server and director).

const mhSlots = 4093

type hkey [2]uint64

var (
	mhHash1 = hkey{2654435761, 2654435761}
	mhHash2 = hkey{2654446892, 2654446892}
)

// hsiphash4 is the kernel's hsiphash of a 4-byte value on 64-bit.
func hsiphash4(v uint32, k hkey) uint32 {
	v0 := uint64(0x736f6d6570736575) ^ k[0]
	v1 := uint64(0x646f72616e646f6d) ^ k[1]
	v2 := uint64(0x6c7967656e657261) ^ k[0]
	v3 := uint64(0x7465646279746573) ^ k[1]
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13) ^ v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16) ^ v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21) ^ v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17) ^ v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	b := uint64(4)<<56 | uint64(v)
	v3 ^= b
	round()
	v0 ^= b
	v2 ^= 0xff
	round()
	round()
	round()
	return uint32((v0 ^ v1) ^ (v2 ^ v3))
}

// mhHashKey is ip_vs_mh_hashkey for an IPv4 address.
func mhHashKey(a netip.AddrPort, k hkey, offset uint32) uint32 {
	b := a.Addr().As4()
	return hsiphash4(offset+uint32(a.Port())+binary.BigEndian.Uint32(b[:]), k)
}

// mhTable is ip_vs_mh_populate over real servers of weight 1 in kernel
// list order: each slot's index into list.
func mhTable(list []netip.AddrPort) []int {
	skip := make([]uint32, len(list))
	perm := make([]uint32, len(list))
	for i, d := range list {
		perm[i] = mhHashKey(d, mhHash1, 0) % mhSlots
		skip[i] = mhHashKey(d, mhHash2, 0)%(mhSlots-1) + 1
	}
	table := make([]int, mhSlots)
	for i := range table {
		table[i] = -1
	}
	for n := 0; ; {
		for i := range list {
			for table[perm[i]] >= 0 {
				perm[i] = (perm[i] + skip[i]) % mhSlots
			}
			table[perm[i]] = i
			if n++; n == mhSlots {
				return table
			}
		}
	}
}

func mhPick(list []netip.AddrPort, table []int, client netip.AddrPort) netip.AddrPort {
	return list[table[mhHashKey(client, mhHash1, 0)%mhSlots]]
}

func TestKernelMaglevTablesFollowTheListOrder(t *testing.T) {
	rs := func(n int) netip.AddrPort {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, 0, byte(10 + n)}), 9000)
	}
	client := func(port uint16) netip.AddrPort { return netip.AddrPortFrom(netip.MustParseAddr("198.19.1.2"), port) }
	order := func(ns ...int) []netip.AddrPort {
		var out []netip.AddrPort
		for _, n := range ns {
			out = append(out, rs(n))
		}
		return out
	}
	// Flows a VM run recorded (client port, real server) with the three
	// kernels at rs3 rs2 rs1 (all added at once in canonical order).
	canonical := order(3, 2, 1)
	tab := mhTable(canonical)
	for _, f := range []struct {
		port uint16
		rs   int
	}{{41454, 2}, {41466, 1}, {41480, 3}, {41484, 1}, {41490, 2}, {41494, 2}, {41508, 1}, {41516, 3}, {41524, 1}, {41526, 1}, {41538, 3}, {41542, 2}} {
		if got := mhPick(canonical, tab, client(f.port)); got != rs(f.rs) {
			t.Errorf("client port %d: the replica picks %s, the kernel picked %s", f.port, got, rs(f.rs))
		}
	}

	// The CI run that reset a survivor's flow: director 2's first checks
	// passed rs1, rs2, rs3 (list rs3 rs2 rs1), director 3's rs1, rs3, rs2
	// (list rs2 rs3 rs1). Their tables differ in a few slots, and the
	// reset flow (client port 45774, moved from director 2 to 3) is in one.
	d2, d3 := order(3, 2, 1), order(2, 3, 1)
	t2, t3 := mhTable(d2), mhTable(d3)
	differ := 0
	for i := range t2 {
		if d2[t2[i]] != d3[t3[i]] {
			differ++
		}
	}
	if differ == 0 || differ > 20 {
		t.Errorf("%d of %d slots differ between the two orders, want a few", differ, mhSlots)
	}
	if a, b := mhPick(d2, t2, client(45774)), mhPick(d3, t3, client(45774)); a == b {
		t.Errorf("client port 45774 maps to %s under both orders", a)
	} else {
		t.Logf("%d of %d slots differ; client port 45774: %s on director 2, %s on director 3", differ, mhSlots, a, b)
	}
}
