package health

import (
	"encoding/binary"

	"golang.org/x/net/bpf"
)

// The segments of the half-open tcp check: the SYN it sends, what it reads
// of a reply, and the kernel filter that lets only replies to its port
// reach it. Pure functions, so that tier 1 tests them without a raw socket.

const (
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpACK = 0x10

	// synLen is a SYN's length: the header and an MSS option (a SYN
	// without options is valid, but looks like a scanner's to some stacks).
	synLen = 24
	// replyKeep is how much of a reply the filter passes to user space: an
	// IPv4 header with options (60 bytes) and the TCP header's first 14.
	replyKeep = 80
)

// synSegment writes a SYN from sport to dport with sequence seq into b,
// its checksum zero (the caller's, or the kernel's with IPV6_CHECKSUM).
func synSegment(b *[synLen]byte, sport, dport uint16, seq uint32, mss uint16) {
	be := binary.BigEndian
	be.PutUint16(b[0:], sport)
	be.PutUint16(b[2:], dport)
	be.PutUint32(b[4:], seq)
	be.PutUint32(b[8:], 0)
	b[12] = synLen / 4 << 4
	b[13] = tcpSYN
	be.PutUint16(b[14:], 64240)
	be.PutUint32(b[16:], 0) // checksum, urgent pointer
	b[20], b[21] = 2, 4     // MSS
	be.PutUint16(b[22:], mss)
}

// tcpChecksum4 is the checksum of seg sent from src to dst over IPv4 (the
// pseudo-header's addresses, protocol and length, then the segment).
func tcpChecksum4(src, dst [4]byte, seg []byte) uint16 {
	sum := uint32(6) + uint32(len(seg))
	for i := 0; i < 4; i += 2 {
		sum += uint32(src[i])<<8 | uint32(src[i+1])
		sum += uint32(dst[i])<<8 | uint32(dst[i+1])
	}
	for i := 0; i+1 < len(seg); i += 2 {
		sum += uint32(seg[i])<<8 | uint32(seg[i+1])
	}
	if len(seg)%2 == 1 {
		sum += uint32(seg[len(seg)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// tcpReply is what the prober reads of a segment that reached its port.
type tcpReply struct {
	sport, dport uint16
	ack          uint32
	flags        uint8
}

// parseReply reads b, a TCP header (IPv6 raw sockets deliver it first) or
// an IPv4 packet (ipHeader: IPv4 raw sockets deliver the IP header too).
func parseReply(b []byte, ipHeader bool) (tcpReply, bool) {
	if ipHeader {
		if len(b) < 20 || b[0]>>4 != 4 {
			return tcpReply{}, false
		}
		b = b[int(b[0]&0x0f)*4:]
	}
	if len(b) < 14 {
		return tcpReply{}, false
	}
	be := binary.BigEndian
	return tcpReply{sport: be.Uint16(b[0:]), dport: be.Uint16(b[2:]), ack: be.Uint32(b[8:]), flags: b[13]}, true
}

// replyFilter is the classic BPF program of a prober's raw socket: it
// passes TCP segments to port that carry RST, or SYN and ACK, and drops
// everything else in the kernel (a director's other TCP traffic reaches
// every raw TCP socket). ipHeader: the socket sees IPv4 packets, the TCP
// header after an IP header of variable length.
func replyFilter(port uint16, ipHeader bool) ([]bpf.RawInstruction, error) {
	var prog []bpf.Instruction
	load := func(off, size uint32) bpf.Instruction {
		if ipHeader {
			return bpf.LoadIndirect{Off: off, Size: int(size)}
		}
		return bpf.LoadAbsolute{Off: off, Size: int(size)}
	}
	if ipHeader {
		prog = append(prog, bpf.LoadMemShift{Off: 0}) // X: the IP header's length
	}
	prog = append(prog,
		load(2, 2), // destination port
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(port), SkipTrue: 5},
		load(13, 1), // flags
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: tcpRST, SkipTrue: 2},
		bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: tcpSYN | tcpACK},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: tcpSYN | tcpACK, SkipFalse: 1},
		bpf.RetConstant{Val: replyKeep},
		bpf.RetConstant{Val: 0},
	)
	return bpf.Assemble(prog)
}
