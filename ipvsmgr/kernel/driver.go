// Package kernel is ipvsmgr's driver for the Linux kernel: IPVS over generic
// netlink, VIPs with rtnetlink, fwmark rules with iptables.
package kernel

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// Options configure Open.
type Options struct {
	// LoadModule runs `modprobe ip_vs` when the kernel has no IPVS yet.
	LoadModule bool
	// Timeout bounds every exchange with the kernel; 0 means 30 s.
	Timeout time.Duration
}

// Driver talks to kernel IPVS over generic netlink, batching requests. It is
// safe for concurrent use.
//
// It does not go through moby/ipvs: that library execs modprobe for every
// handle, waits forever for a reply that never comes, writes the IPv4
// persistence netmask in the wrong byte order, reads 32-bit counters, and
// sends one request per round trip, which cannot beat keepalived's apply time
// nor ipvsadm's read time. The VM tier uses moby/ipvs as an independent reader
// of what this driver writes.
type Driver struct {
	mu      sync.Mutex
	timeout time.Duration
	conns   []*conn // conns[0] writes; all of them read real servers in parallel
}

// procIPVS exists when the ip_vs module is loaded (per network namespace).
const procIPVS = "/proc/net/ip_vs"

// Open connects to kernel IPVS. When the kernel has none it returns an error
// wrapping ipvsmgr.ErrIPVSUnavailable, never panics or hangs.
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
	// All sockets are opened here, in the caller's network namespace (a
	// socket opened later by another thread could be in another).
	d := &Driver{timeout: opt.Timeout}
	for range destReaders {
		c, err := newConn(fam.ID)
		if err != nil {
			d.Close()
			return nil, err
		}
		d.conns = append(d.conns, c)
	}
	return d, nil
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
	for _, c := range d.conns {
		c.close()
	}
}

// Table reads every virtual service with its real servers, counters (64-bit
// where the kernel offers them) and the global timeouts.
func (d *Driver) Table(ctx context.Context) (*ipvsmgr.Table, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := os.Stat(procIPVS); err != nil {
		return nil, fmt.Errorf("%w: %s is absent", ipvsmgr.ErrIPVSUnavailable, procIPVS)
	}
	return readTable(ctx, d.conns, d.timeout)
}

// Apply carries out ops, many to a sendmsg.
func (d *Driver) Apply(ctx context.Context, ops []ipvsmgr.Op) []error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(ops) == 0 {
		return nil
	}
	return d.conns[0].apply(ctx, ops, d.timeout)
}
