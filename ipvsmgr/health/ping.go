package health

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/ipvsctl/ipvsctl/internal/regularfile"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// checkPing sends one ICMP echo request (keepalived's PING_CHECK) and
// passes on the echo reply. It takes an unprivileged ICMP socket (Linux's
// ping socket, allowed to the groups of net.ipv4.ping_group_range, which
// also covers IPv6), else a raw one (CAP_NET_RAW, as root); with neither
// the check cannot run (a fault, not a verdict on the server).
func checkPing(ctx context.Context, spec *ipvsmgr.CheckSpec) Result {
	dst := spec.Target.Addr()
	c, unprivileged, err := listenICMP(dst.Is6())
	if err != nil {
		return fault("no ICMP socket (neither net.ipv4.ping_group_range nor CAP_NET_RAW allows one): " + shorten(err.Error()))
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()

	id, seq := rand.IntN(1<<16), rand.IntN(1<<16)
	var typ icmp.Type = ipv4.ICMPTypeEcho
	proto := 1 // ICMP
	if dst.Is6() {
		typ, proto = ipv6.ICMPTypeEchoRequest, 58 // ICMPv6
	}
	msg := icmp.Message{Type: typ, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("ipvsctl ping check")}}
	b, err := msg.Marshal(nil) // ICMPv6's checksum is the kernel's
	if err != nil {
		return fault("echo request: " + err.Error())
	}
	var to net.Addr = &net.IPAddr{IP: dst.AsSlice(), Zone: dst.Zone()}
	if unprivileged {
		to = &net.UDPAddr{IP: dst.AsSlice(), Zone: dst.Zone()}
	}
	if _, err := c.WriteTo(b, to); err != nil {
		return describe(ctx, spec, err)
	}
	buf := make([]byte, 1500)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) {
				return fail("no echo reply within " + spec.Timeout.String())
			}
			return describe(ctx, spec, err)
		}
		if !sameIP(from, dst.AsSlice()) {
			continue // a raw socket sees every ICMP message
		}
		m, err := icmp.ParseMessage(proto, buf[:n])
		if err != nil {
			continue
		}
		switch body := m.Body.(type) {
		case *icmp.Echo:
			// A ping socket's kernel sets the id (and matches it).
			if (m.Type == ipv4.ICMPTypeEchoReply || m.Type == ipv6.ICMPTypeEchoReply) && body.Seq == seq && (unprivileged || body.ID == id) {
				return pass("echo reply")
			}
		}
	}
}

func listenICMP(v6 bool) (*icmp.PacketConn, bool, error) {
	dgram, raw := "udp4", "ip4:icmp"
	if v6 {
		dgram, raw = "udp6", "ip6:ipv6-icmp"
	}
	c, err := icmp.ListenPacket(dgram, "")
	if err == nil {
		return c, true, nil
	}
	c, rawErr := icmp.ListenPacket(raw, "")
	if rawErr == nil {
		return c, false, nil
	}
	return nil, false, errors.Join(err, rawErr)
}

func sameIP(a net.Addr, ip net.IP) bool {
	switch a := a.(type) {
	case *net.IPAddr:
		return a.IP.Equal(ip)
	case *net.UDPAddr:
		return a.IP.Equal(ip)
	}
	return false
}

// checkFile reads a number from a file, as keepalived's FILE_CHECK reads
// its track_file: the number (strtol of up to 127 bytes; a missing or
// empty file is 0) times the check's weight factor, negated with reverse.
// With a factor 0, a non-zero number is down (zero with reverse); else a
// product of -65535 or less is down and any other is added to the server's
// weight (Result.Delta).
func checkFile(spec *ipvsmgr.CheckSpec) Result {
	v, err := readTrackFile(spec.File)
	if err != nil {
		return fault(shorten(err.Error()))
	}
	if spec.FileWeight == 0 {
		if (v != 0) != spec.FileReverse {
			return fail(spec.File + " holds " + strconv.FormatInt(v, 10))
		}
		return pass(spec.File + " holds " + strconv.FormatInt(v, 10))
	}
	mult := int64(1)
	if spec.FileReverse {
		mult = -1
	}
	status := max(min(v*int64(spec.FileWeight)*mult, 65534), -65535)
	if status == -65535 {
		return fail(spec.File + " holds " + strconv.FormatInt(v, 10) + ": weight -65535, down")
	}
	r := pass(spec.File + " holds " + strconv.FormatInt(v, 10))
	r.Delta = int(status)
	return r
}

// readTrackFile is keepalived's process_track_file: a file that cannot be
// opened or is empty reads as 0. Anything but a regular file (a FIFO with
// no writer would hang the check) is a fault, found without blocking.
func readTrackFile(path string) (int64, error) {
	f, err := regularfile.Open(path, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.EACCES) {
			return 0, nil
		}
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 127)
	n, _ := f.Read(buf)
	v, ok := strtol(string(buf[:n]))
	if !ok {
		// keepalived logs "Invalid number" and keeps the last status.
		return 0, errors.New("invalid number in " + path + " (outside the int range)")
	}
	return v, nil
}

// strtol is C's strtol(s, NULL, 0) as keepalived reads a track file:
// blanks, a sign, 0x for hex, 0 for octal, digits up to the first that is
// not one; no digits is 0. false: outside the int range.
func strtol(s string) (int64, bool) {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] >= '\t' && s[i] <= '\r') {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	base := int64(10)
	if i+1 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') && i+2 < len(s) && hexDigit(s[i+2]) >= 0 {
		base, i = 16, i+2
	} else if i < len(s) && s[i] == '0' {
		base = 8
	}
	var v int64
	for ; i < len(s); i++ {
		d := hexDigit(s[i])
		if d < 0 || int64(d) >= base {
			break
		}
		if v = v*base + int64(d); v > 1<<31 {
			return 0, false
		}
	}
	if neg {
		v = -v
	}
	return v, v >= -(1<<31) && v < 1<<31
}

func hexDigit(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
