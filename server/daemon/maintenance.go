package daemon

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// maintenanceLookup bounds the resolution of a host name in the
// maintenance directory; what it found (or that it failed) is kept for
// maintenanceTTL, so that a file that names no host (a README) costs one
// lookup in that time, not one a second.
const (
	maintenanceLookup = time.Second
	maintenanceTTL    = 30 * time.Second
)

// maintenanceWatch is the daemon's side of settings.maintenance_dir
// (ldirectord's maintenancedir): the loop reads the directory at each turn
// (every Poll, a second by default; ldirectord looks at each check) and lays
// what it holds over every plan with the health (sharedKernel.withHealth).
type maintenanceWatch struct {
	// lookup resolves a file named for a host (ldirectord matches the real
	// server's reverse name; here the name's addresses are matched).
	lookup  func(ctx context.Context, host string) ([]netip.Addr, error)
	lastErr string // the read's last error, logged once
	hosts   map[string]resolved
}

// resolved is a host name's addresses as last looked up.
type resolved struct {
	addrs []netip.Addr
	err   error
	at    time.Time
}

// resolve is host's addresses, looked up again once maintenanceTTL old.
func (w *maintenanceWatch) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if r, ok := w.hosts[host]; ok && time.Since(r.at) < maintenanceTTL {
		return r.addrs, r.err
	}
	lctx, cancel := context.WithTimeout(ctx, maintenanceLookup)
	defer cancel()
	addrs, err := w.lookup(lctx, host)
	if w.hosts == nil {
		w.hosts = map[string]resolved{}
	}
	w.hosts[host] = resolved{addrs: addrs, err: err, at: time.Now()}
	return addrs, err
}

// checkMaintenance reads the maintenance directory and, when what it holds
// out changed, applies it at once.
func (d *Daemon) checkMaintenance(ctx context.Context) {
	sk := d.sk
	m, err := d.maint.read(ctx, sk.maintenanceDir())
	if msg := errText(err); msg != d.maint.lastErr {
		d.maint.lastErr = msg
		if err != nil {
			d.Log.Warn("maintenance directory", "dir", sk.maintenanceDir(), "err", err)
		}
	}
	old := sk.maint.Load()
	if sameMaintenance(old, m) {
		return
	}
	sk.maint.Store(m)
	sk.healthGen.Add(1)
	for _, k := range changedKeys(old, m) {
		if f := m.File(k); f != "" {
			d.Log.Info("real server in maintenance: weight 0 in every service", "server", k.String(), "file", f)
		} else {
			d.Log.Info("real server out of maintenance", "server", k.String(), "file", old.File(k))
		}
	}
	if _, err := sk.reconcile(ctx, true, nil); err != nil && sk.isOpen() && ctx.Err() == nil {
		d.Log.Error("reconcile after a maintenance change", "err", err)
		d.reconcileFailed(0, err)
	}
	d.checkQuorum(ctx)
}

// read lists dir ("" none: nil) as ldirectord's _check_real_for_maintenance
// matches its files: ADDRESS, ADDRESS:PORT, HOST and HOST:PORT; any other
// name, or a host name that does not resolve, holds nothing out (the
// error names the first such host).
func (w *maintenanceWatch) read(ctx context.Context, dir string) (*ipvsmgr.Maintenance, error) {
	if dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	m := &ipvsmgr.Maintenance{Dir: dir, Files: map[ipvsmgr.DestKey]string{}}
	var lookupErr error
	for _, e := range entries {
		name := e.Name()
		addr, port, host, ok := ipvsmgr.ParseMaintenanceName(name)
		if !ok {
			continue
		}
		addrs := []netip.Addr{addr}
		if host != "" {
			if addrs, err = w.resolve(ctx, host); err != nil {
				lookupErr = cmp.Or(lookupErr, fmt.Errorf("maintenance file %s: %w", filepath.Join(dir, name), err))
				continue
			}
		}
		for _, a := range addrs {
			m.Files[ipvsmgr.DestKey{Addr: a.Unmap(), Port: port}] = name
		}
	}
	if len(m.Files) == 0 {
		m = nil
	}
	return m, lookupErr
}

func lookupHost(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func files(m *ipvsmgr.Maintenance) map[ipvsmgr.DestKey]string {
	if m == nil {
		return nil
	}
	return m.Files
}

func sameMaintenance(a, b *ipvsmgr.Maintenance) bool {
	return maps.Equal(files(a), files(b)) && (a == nil || b == nil || a.Dir == b.Dir)
}

// changedKeys are the servers held out by one of a and b and not the other
// (or by another file), in order.
func changedKeys(a, b *ipvsmgr.Maintenance) []ipvsmgr.DestKey {
	var out []ipvsmgr.DestKey
	for k, f := range files(a) {
		if files(b)[k] != f {
			out = append(out, k)
		}
	}
	for k := range files(b) {
		if _, ok := files(a)[k]; !ok {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(x, y ipvsmgr.DestKey) int {
		if c := x.Addr.Compare(y.Addr); c != 0 {
			return c
		}
		return int(x.Port) - int(y.Port)
	})
	return out
}
