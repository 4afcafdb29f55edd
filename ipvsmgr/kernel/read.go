package kernel

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"net/netip"
	"sync"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// attrs yields the attributes in b: each type and value.
func attrs(b []byte) iter.Seq2[uint16, []byte] {
	return func(yield func(uint16, []byte) bool) {
		for len(b) >= nlaHdrLen {
			l := int(native.Uint16(b))
			if l < nlaHdrLen || l > len(b) {
				return
			}
			if !yield(native.Uint16(b[2:])&0x3fff, b[nlaHdrLen:l]) { // strip NESTED and BYTEORDER bits
				return
			}
			b = b[min(align4(l), len(b)):]
		}
	}
}

func u16(b []byte) uint16 {
	if len(b) < 2 {
		return 0
	}
	return native.Uint16(b)
}

func u32(b []byte) uint32 {
	if len(b) < 4 {
		return 0
	}
	return native.Uint32(b)
}

// counter reads a stats value: u32 in the old STATS attribute, u64 in STATS64.
func counter(b []byte) uint64 {
	switch len(b) {
	case 4:
		return uint64(native.Uint32(b))
	case 8:
		return native.Uint64(b)
	}
	return 0
}

func parseStats(b []byte) ipvsmgr.Stats {
	var s ipvsmgr.Stats
	// Indexed by IPVS_STATS_ATTR_*.
	dst := [...]*uint64{nil, &s.Conns, &s.InPkts, &s.OutPkts, &s.InBytes, &s.OutBytes, &s.CPS, &s.InPPS, &s.OutPPS, &s.InBPS, &s.OutBPS}
	for typ, val := range attrs(b) {
		if int(typ) < len(dst) && dst[typ] != nil {
			*dst[typ] = counter(val)
		}
	}
	return s
}

func parseAddr(b []byte, family uint16) netip.Addr {
	if family == ipvsmgr.FamilyIPv4 && len(b) >= 4 {
		return netip.AddrFrom4([4]byte(b[:4]))
	}
	if len(b) >= 16 {
		return netip.AddrFrom16([16]byte(b[:16]))
	}
	return netip.Addr{}
}

// nestedPayload returns the value of the top-level attribute typ of a reply.
func nestedPayload(payload []byte, typ uint16) []byte {
	var out []byte
	if len(payload) < genlHdrLen {
		return nil
	}
	for t, val := range attrs(payload[genlHdrLen:]) {
		if t == typ {
			out = val
		}
	}
	return out
}

func parseService(b []byte) *ipvsmgr.VirtualService {
	s := &ipvsmgr.VirtualService{}
	var addr []byte
	var stats32, stats64 []byte
	var rawMask uint32
	for typ, val := range attrs(b) {
		switch typ {
		case attrSvcAF:
			s.Key.Family = u16(val)
		case attrSvcProtocol:
			s.Key.Protocol = u16(val)
		case attrSvcAddr:
			addr = val
		case attrSvcPort:
			if len(val) >= 2 {
				s.Key.Port = binary.BigEndian.Uint16(val)
			}
		case attrSvcFWMark:
			s.Key.FWMark = u32(val)
		case attrSvcSched:
			s.Scheduler = cString(val)
		case attrSvcFlags:
			s.Flags = u32(val) &^ ipvsmgr.FlagHashed
		case attrSvcTimeout:
			s.Timeout = u32(val)
		case attrSvcNetmask:
			rawMask = u32(val)
		case attrSvcStats:
			stats32 = val
		case attrSvcStats64:
			stats64 = val
		}
	}
	if s.Key.FWMark == 0 {
		s.Key.Addr = parseAddr(addr, s.Key.Family)
	}
	s.Netmask = decodeNetmask(s.Key.Family, rawMask)
	s.Stats = pickStats(stats32, stats64)
	return s
}

func pickStats(s32, s64 []byte) ipvsmgr.Stats {
	if s64 != nil {
		return parseStats(s64)
	}
	return parseStats(s32)
}

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

func parseDest(b []byte, svcFamily uint16) *ipvsmgr.Destination {
	d := &ipvsmgr.Destination{}
	var addr, stats32, stats64 []byte
	family := svcFamily
	for typ, val := range attrs(b) {
		switch typ {
		case attrDestAddr:
			addr = val
		case attrDestPort:
			if len(val) >= 2 {
				d.Key.Port = binary.BigEndian.Uint16(val)
			}
		case attrDestFwd:
			d.Forward = ipvsmgr.Forwarding(u32(val) & 0x7)
		case attrDestWeight:
			d.Weight = u32(val)
		case attrDestUThresh:
			d.UpperThreshold = u32(val)
		case attrDestLThresh:
			d.LowerThreshold = u32(val)
		case attrDestTunType:
			if len(val) >= 1 {
				d.TunType = val[0]
			}
		case attrDestTunPort:
			if len(val) >= 2 {
				d.TunPort = binary.BigEndian.Uint16(val)
			}
		case attrDestTunFlag:
			d.TunFlags = u16(val)
		case attrDestActive:
			d.ActiveConns = u32(val)
		case attrDestInact:
			d.InactiveConns = u32(val)
		case attrDestAF:
			family = u16(val)
		case attrDestStats:
			stats32 = val
		case attrDestStats64:
			stats64 = val
		}
	}
	d.Key.Addr = parseAddr(addr, family)
	d.Stats = pickStats(stats32, stats64)
	return d
}

// readTable dumps every service, then their real servers (over all the
// sockets in parallel), then the timeouts.
func readTable(ctx context.Context, conns []*conn, deadline time.Duration) (*ipvsmgr.Table, error) {
	c := conns[0]
	t := &ipvsmgr.Table{}
	errs, err := c.exchange(ctx, 1, false, func(e *encoder, _ int, seq uint32) {
		e.end(e.beginFlags(c.family, cmdGetService, seq, nlmFRequest|nlmFDump))
	}, func(_ int, payload []byte) {
		if b := nestedPayload(payload, attrCmdService); b != nil {
			t.Services = append(t.Services, parseService(b))
		}
	}, deadline)
	if err == nil {
		err = errors.Join(errs...)
	}
	if err != nil {
		return nil, fmt.Errorf("list IPVS services: %w", err)
	}
	if err := readDests(ctx, conns, t.Services, deadline); err != nil {
		return nil, err
	}
	errs, err = c.exchange(ctx, 1, false, func(e *encoder, _ int, seq uint32) {
		e.end(e.begin(c.family, cmdGetConfig, seq))
	}, func(_ int, payload []byte) {
		if len(payload) < genlHdrLen {
			return
		}
		for typ, val := range attrs(payload[genlHdrLen:]) {
			switch typ {
			case attrCmdTimeoutTCP:
				t.Timeouts.TCP = u32(val)
			case attrCmdTimeoutFin:
				t.Timeouts.TCPFin = u32(val)
			case attrCmdTimeoutUDP:
				t.Timeouts.UDP = u32(val)
			}
		}
	}, deadline)
	if err == nil {
		err = errors.Join(errs...)
	}
	if err != nil {
		return nil, fmt.Errorf("read IPVS timeouts: %w", err)
	}
	return t, nil
}

// readDests fills each service's real servers. The kernel answers one dump
// per socket at a time: a dump holds its socket until its DONE is read (IPVS
// never finishes a non-empty dump in its first reply), and a request that
// comes meanwhile gets EBUSY. So the services are shared among the sockets,
// read in parallel, each asking for one service's real servers at a time.
func readDests(ctx context.Context, conns []*conn, svcs []*ipvsmgr.VirtualService, deadline time.Duration) error {
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for w, c := range conns {
		wg.Go(func() {
			for i := w; i < len(svcs); i += len(conns) {
				if err := c.dumpDests(ctx, svcs[i], deadline); err != nil {
					errs[w] = fmt.Errorf("list real servers of %s: %w", svcs[i].Key, err)
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *conn) dumpDests(ctx context.Context, svc *ipvsmgr.VirtualService, deadline time.Duration) error {
	errs, err := c.exchange(ctx, 1, false, func(e *encoder, _ int, seq uint32) {
		start := e.beginFlags(c.family, cmdGetDest, seq, nlmFRequest|nlmFDump)
		e.service(svc, false)
		e.end(start)
	}, func(_ int, payload []byte) {
		if b := nestedPayload(payload, attrCmdDest); b != nil {
			svc.Dests = append(svc.Dests, parseDest(b, svc.Key.Family))
		}
	}, deadline)
	if err == nil {
		err = errs[0]
	}
	return err
}
