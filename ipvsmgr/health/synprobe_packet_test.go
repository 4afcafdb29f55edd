package health

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
)

func TestSynSegmentChecksum(t *testing.T) {
	var seg [synLen]byte
	synSegment(&seg, 40000, 80, 0xdeadbeef, 1460)
	src, dst := [4]byte{198, 18, 0, 1}, [4]byte{198, 18, 0, 11}
	sum := tcpChecksum4(src, dst, seg[:])
	binary.BigEndian.PutUint16(seg[16:], sum)
	// A segment with its checksum in place sums to zero (RFC 1071).
	if got := tcpChecksum4(src, dst, seg[:]); got != 0 {
		t.Errorf("checksum over the checksummed segment: %#04x, want 0", got)
	}
	// Computed apart (Python: the pseudo-header and segment as 16-bit words, folded).
	if sum != 0xd6d6 {
		t.Errorf("checksum %#04x, want 0xd6d6", sum)
	}
	r, ok := parseReply(seg[:], false)
	if !ok || r.sport != 40000 || r.dport != 80 || r.flags != tcpSYN || r.ack != 0 {
		t.Errorf("parsed %+v %v, want ports 40000 -> 80, SYN, ack 0", r, ok)
	}
	if seg[12]>>4 != 6 || seg[20] != 2 || binary.BigEndian.Uint16(seg[22:]) != 1460 {
		t.Errorf("header length %d words, option %d mss %d: want 6, 2 (MSS), 1460", seg[12]>>4, seg[20], binary.BigEndian.Uint16(seg[22:]))
	}
}

// segment is a TCP header to port from 80 with flags, after an IPv4 header
// of ihl words when ihl > 0.
func segment(ihl int, port uint16, flags uint8, ack uint32) []byte {
	b := make([]byte, ihl*4+20)
	if ihl > 0 {
		b[0] = 0x40 | byte(ihl)
		b[9] = 6
	}
	tcp := b[ihl*4:]
	binary.BigEndian.PutUint16(tcp[0:], 80)
	binary.BigEndian.PutUint16(tcp[2:], port)
	binary.BigEndian.PutUint32(tcp[8:], ack)
	tcp[12] = 5 << 4
	tcp[13] = flags
	return b
}

func TestReplyFilter(t *testing.T) {
	const port = 40000
	cases := []struct {
		name  string
		port  uint16
		flags uint8
		pass  bool
	}{
		{"SYN-ACK", port, tcpSYN | tcpACK, true},
		{"RST-ACK", port, tcpRST | tcpACK, true},
		{"RST", port, tcpRST, true},
		{"ACK", port, tcpACK, false},
		{"SYN", port, tcpSYN, false},
		{"FIN-ACK", port, 0x01 | tcpACK, false},
		{"data", port, 0x08 | tcpACK, false},
		{"SYN-ACK to another port", port + 1, tcpSYN | tcpACK, false},
		{"RST to another port", 22, tcpRST | tcpACK, false},
	}
	for _, family := range []struct {
		name string
		ihl  []int // IPv4 header lengths in words; 0: no IP header
	}{{"ipv4", []int{5, 6, 15}}, {"ipv6", []int{0}}} {
		raw, err := replyFilter(port, family.name == "ipv4")
		if err != nil {
			t.Fatal(err)
		}
		prog, ok := bpf.Disassemble(raw)
		if !ok {
			t.Fatalf("%s: the assembled filter does not disassemble", family.name)
		}
		vm, err := bpf.NewVM(prog)
		if err != nil {
			t.Fatalf("%s: %v", family.name, err)
		}
		for _, ihl := range family.ihl {
			for _, c := range cases {
				pkt := segment(ihl, c.port, c.flags, 1)
				n, err := vm.Run(pkt)
				if err != nil {
					t.Fatalf("%s %s: %v", family.name, c.name, err)
				}
				if (n > 0) != c.pass {
					t.Errorf("%s (IP header %d bytes) %s: kept %d bytes, want passed %v", family.name, ihl*4, c.name, n, c.pass)
				}
				if c.pass {
					r, ok := parseReply(pkt[:min(n, len(pkt))], ihl > 0)
					if !ok || r.dport != c.port || r.flags != c.flags || r.ack != 1 {
						t.Errorf("%s %s: parsed %+v %v from the %d bytes kept", family.name, c.name, r, ok, n)
					}
				}
			}
		}
		if n, _ := vm.Run(make([]byte, 8)); n != 0 {
			t.Errorf("%s: a runt of 8 bytes passed (%d)", family.name, n)
		}
	}
}
