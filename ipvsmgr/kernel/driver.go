// Package kernel is ipvsmgr's driver for the Linux kernel: IPVS over generic
// netlink, VIPs with rtnetlink, fwmark rules with iptables.
package kernel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/moby/ipvs"
	"github.com/vishvananda/netlink"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// Options configure Open.
type Options struct {
	// LoadModule runs `modprobe ip_vs` when the kernel has no IPVS yet.
	LoadModule bool
	// Timeout bounds every kernel call; 0 means 30 s.
	Timeout time.Duration
}

// Driver talks to kernel IPVS: reads through moby/ipvs, writes through a
// batching generic netlink socket. It is safe for concurrent use.
type Driver struct {
	mu      sync.Mutex
	timeout time.Duration
	read    *ipvs.Handle
	write   *batchSocket
}

// procIPVS exists when the ip_vs module is loaded (per network namespace).
const procIPVS = "/proc/net/ip_vs"

// Open connects to kernel IPVS. When the kernel has none it returns an error
// wrapping ipvsmgr.ErrIPVSUnavailable (moby/ipvs would panic or hang there).
func Open(opt Options) (*Driver, error) {
	if opt.Timeout == 0 {
		opt.Timeout = 30 * time.Second
	}
	if err := ensureModule(opt.LoadModule); err != nil {
		return nil, err
	}
	fam, err := netlink.GenlFamilyGet("IPVS")
	if err != nil {
		return nil, fmt.Errorf("%w: generic netlink family IPVS: %v", ipvsmgr.ErrIPVSUnavailable, err)
	}
	w, err := newBatchSocket(fam.ID)
	if err != nil {
		return nil, err
	}
	return &Driver{timeout: opt.Timeout, write: w}, nil
}

func ensureModule(load bool) error {
	if _, err := os.Stat(procIPVS); err == nil {
		return nil
	}
	if !load {
		return fmt.Errorf("%w: %s is absent; run `modprobe ip_vs`", ipvsmgr.ErrIPVSUnavailable, procIPVS)
	}
	out, err := exec.Command("modprobe", "ip_vs").CombinedOutput()
	if _, statErr := os.Stat(procIPVS); statErr == nil {
		return nil
	}
	detail := strings.TrimSpace(string(out))
	if detail == "" && err != nil {
		detail = err.Error()
	}
	return fmt.Errorf("%w: modprobe ip_vs: %s", ipvsmgr.ErrIPVSUnavailable, detail)
}

// Close releases the sockets.
func (d *Driver) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.read != nil {
		d.read.Close()
		d.read = nil
	}
	d.write.close()
}

// withDeadline runs f on the read handle and gives up after the timeout. A
// moby/ipvs call whose reply never comes retries forever, so on timeout the
// handle is closed (which ends that call) and the next call opens a new one.
func (d *Driver) withDeadline(ctx context.Context, what string, f func(h *ipvs.Handle) error) error {
	if d.read == nil {
		h, err := ipvs.New("")
		if err != nil {
			return fmt.Errorf("open IPVS handle: %w", err)
		}
		d.read = h
	}
	h := d.read
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f(h) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		h.Close()
		d.read = nil
		return fmt.Errorf("%s: no answer from the kernel: %w", what, ctx.Err())
	}
}

// Table reads every virtual service with its real servers, counters and the
// global timeouts.
func (d *Driver) Table(ctx context.Context) (*ipvsmgr.Table, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := os.Stat(procIPVS); err != nil {
		return nil, fmt.Errorf("%w: %s is absent", ipvsmgr.ErrIPVSUnavailable, procIPVS)
	}
	t := &ipvsmgr.Table{}
	err := d.withDeadline(ctx, "list IPVS services", func(h *ipvs.Handle) error {
		svcs, err := h.GetServices()
		if err != nil {
			return err
		}
		for _, s := range svcs {
			vs, err := fromMobyService(s)
			if err != nil {
				return err
			}
			dests, err := h.GetDestinations(s)
			if err != nil {
				return fmt.Errorf("list real servers of %s: %w", vs.Key, err)
			}
			for _, dst := range dests {
				vd, err := fromMobyDest(dst)
				if err != nil {
					return fmt.Errorf("real server of %s: %w", vs.Key, err)
				}
				vs.Dests = append(vs.Dests, vd)
			}
			t.Services = append(t.Services, vs)
		}
		cfg, err := h.GetConfig()
		if err != nil {
			return fmt.Errorf("read IPVS timeouts: %w", err)
		}
		t.Timeouts = ipvsmgr.Timeouts{TCP: uint32(cfg.TimeoutTCP / time.Second), TCPFin: uint32(cfg.TimeoutTCPFin / time.Second), UDP: uint32(cfg.TimeoutUDP / time.Second)}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Apply carries out ops, batched many to a sendmsg.
func (d *Driver) Apply(ctx context.Context, ops []ipvsmgr.Op) []error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(ops) == 0 {
		return nil
	}
	return d.write.apply(ctx, ops, d.timeout)
}

func ipFromNet(ip net.IP, family uint16) (netip.Addr, error) {
	if len(ip) == 0 {
		return netip.Addr{}, nil
	}
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}, fmt.Errorf("bad address %v", ip)
	}
	if family == ipvsmgr.FamilyIPv4 {
		a = a.Unmap()
	}
	return a, nil
}

func fromMobyService(s *ipvs.Service) (*ipvsmgr.VirtualService, error) {
	a, err := ipFromNet(s.Address, s.AddressFamily)
	if err != nil {
		return nil, fmt.Errorf("service address: %w", err)
	}
	if s.FWMark != 0 {
		a = netip.Addr{} // the kernel reports 0.0.0.0 for a fwmark service
	}
	return &ipvsmgr.VirtualService{
		Key: ipvsmgr.ServiceKey{
			Family: s.AddressFamily, Protocol: s.Protocol, Addr: a, Port: s.Port, FWMark: s.FWMark,
		},
		Scheduler: s.SchedName,
		Flags:     s.Flags &^ ipvsmgr.FlagHashed,
		Timeout:   s.Timeout,
		Netmask:   decodeNetmask(s.AddressFamily, s.Netmask),
		Stats:     fromMobyStats(s.Stats),
	}, nil
}

func fromMobyDest(d *ipvs.Destination) (*ipvsmgr.Destination, error) {
	a, err := ipFromNet(d.Address, d.AddressFamily)
	if err != nil {
		return nil, err
	}
	return &ipvsmgr.Destination{
		Key:            ipvsmgr.DestKey{Addr: a, Port: d.Port},
		Forward:        ipvsmgr.Forwarding(d.ConnectionFlags & ipvs.ConnectionFlagFwdMask),
		Weight:         uint32(d.Weight),
		UpperThreshold: d.UpperThreshold,
		LowerThreshold: d.LowerThreshold,
		ActiveConns:    uint32(d.ActiveConnections),
		InactiveConns:  uint32(d.InactiveConnections),
		Stats:          fromMobyStats(ipvs.SvcStats(d.Stats)),
	}, nil
}

func fromMobyStats(s ipvs.SvcStats) ipvsmgr.Stats {
	return ipvsmgr.Stats{
		Conns: uint64(s.Connections), InPkts: uint64(s.PacketsIn), OutPkts: uint64(s.PacketsOut),
		InBytes: s.BytesIn, OutBytes: s.BytesOut, CPS: uint64(s.CPS),
		InPPS: uint64(s.PPSIn), OutPPS: uint64(s.PPSOut), InBPS: uint64(s.BPSIn), OutBPS: uint64(s.BPSOut),
	}
}

// IsUnavailable reports whether err means the kernel has no IPVS.
func IsUnavailable(err error) bool { return errors.Is(err, ipvsmgr.ErrIPVSUnavailable) }
