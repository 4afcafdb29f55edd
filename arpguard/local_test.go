package arpguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// fakeSystem is a real server's kernel in memory.
type fakeSystem struct {
	Sysctl  map[string]string
	Modules map[string]bool
	Links   map[string]bool // name -> up
	Addrs   map[string]bool // "prefix dev"
	Arp     []string        // "CHAIN args"
	Routes  map[string]RouteSpec
	failOn  string // an operation that fails, to test undo's retry
}

func newFakeSystem() *fakeSystem {
	f := &fakeSystem{
		Sysctl:  map[string]string{},
		Modules: map[string]bool{},
		Links:   map[string]bool{"lo": true, "eth0": true, "eth0.100": true},
		Addrs:   map[string]bool{"198.18.0.11/24 eth0": true},
		Routes:  map[string]RouteSpec{},
	}
	for _, dev := range []string{"all", "default", "lo", "eth0", "eth0.100"} {
		f.Sysctl[sysctlKey("ipv4", dev, "arp_ignore")] = "0"
		f.Sysctl[sysctlKey("ipv4", dev, "arp_announce")] = "0"
		f.Sysctl[sysctlKey("ipv4", dev, "rp_filter")] = "1"
	}
	return f
}

func (f *fakeSystem) clone() *fakeSystem {
	return &fakeSystem{Sysctl: maps.Clone(f.Sysctl), Modules: maps.Clone(f.Modules), Links: maps.Clone(f.Links),
		Addrs: maps.Clone(f.Addrs), Arp: slices.Clone(f.Arp), Routes: maps.Clone(f.Routes)}
}

func (f *fakeSystem) fail(op string) error {
	if f.failOn != "" && strings.HasPrefix(op, f.failOn) {
		return errors.New("injected failure: " + op)
	}
	return nil
}

func (f *fakeSystem) ReadSysctl(key string) (string, error) {
	v, ok := f.Sysctl[key]
	if !ok {
		return "", fmt.Errorf("read sysctl %s: no such file", key)
	}
	return v, nil
}

func (f *fakeSystem) WriteSysctl(key, value string) error {
	if _, ok := f.Sysctl[key]; !ok {
		return fmt.Errorf("write sysctl %s: no such file", key)
	}
	f.Sysctl[key] = value
	return f.fail("sysctl " + key)
}

func (f *fakeSystem) ModuleLoaded(name string) (bool, error) { return f.Modules[name], nil }

func (f *fakeSystem) LoadModule(_ context.Context, name string) error {
	f.Modules[name] = true
	if name == "ipip" {
		f.Links[TunnelDevice] = false
		f.Sysctl[sysctlKey("ipv4", TunnelDevice, "rp_filter")] = "1"
	}
	return nil
}

func (f *fakeSystem) UnloadModule(_ context.Context, name string) error {
	delete(f.Modules, name)
	if name == "ipip" {
		delete(f.Links, TunnelDevice)
		delete(f.Sysctl, sysctlKey("ipv4", TunnelDevice, "rp_filter"))
	}
	return nil
}

func (f *fakeSystem) LinkUp(dev string) (bool, error) { return f.Links[dev], nil }

func (f *fakeSystem) SetLinkUp(dev string, up bool) error {
	if _, ok := f.Links[dev]; !ok {
		return fmt.Errorf("link %s not found", dev)
	}
	f.Links[dev] = up
	return nil
}

func (f *fakeSystem) HasAddress(p netip.Prefix, dev string) (bool, error) {
	return f.Addrs[p.String()+" "+dev], nil
}

func (f *fakeSystem) AddAddress(p netip.Prefix, dev string) error {
	if _, ok := f.Links[dev]; !ok {
		return fmt.Errorf("link %s not found", dev)
	}
	f.Addrs[p.String()+" "+dev] = true
	return nil
}

func (f *fakeSystem) DelAddress(p netip.Prefix, dev string) error {
	if err := f.fail("address " + p.String()); err != nil {
		return err
	}
	delete(f.Addrs, p.String()+" "+dev)
	return nil
}

func arpKey(chain string, args []string) string { return chain + " " + strings.Join(args, " ") }

func (f *fakeSystem) HasArpRule(_ context.Context, chain string, args []string) (bool, error) {
	return slices.Contains(f.Arp, arpKey(chain, args)), nil
}

func (f *fakeSystem) AppendArpRule(_ context.Context, chain string, args []string) error {
	f.Arp = append(f.Arp, arpKey(chain, args))
	return nil
}

func (f *fakeSystem) DeleteArpRule(_ context.Context, chain string, args []string) error {
	i := slices.Index(f.Arp, arpKey(chain, args))
	if i < 0 {
		return errors.New("no such rule")
	}
	f.Arp = slices.Delete(f.Arp, i, i+1)
	return nil
}

func routeKey(dst netip.Prefix, metric int) string { return fmt.Sprintf("%s metric %d", dst, metric) }

func (f *fakeSystem) RouteAt(dst netip.Prefix, metric int) (RouteSpec, bool, error) {
	r, ok := f.Routes[routeKey(dst, metric)]
	return r, ok, nil
}

func (f *fakeSystem) ReplaceRoute(r RouteSpec) error {
	f.Routes[routeKey(r.Dst, r.Metric)] = r
	return nil
}

func (f *fakeSystem) DeleteRoute(r RouteSpec) error {
	k := routeKey(r.Dst, r.Metric)
	if cur, ok := f.Routes[k]; !ok || cur.Gateway != r.Gateway {
		return errors.New("no such route")
	}
	delete(f.Routes, k)
	return nil
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// snapshotFiles lists every file and link under root with its content or target.
func snapshotFiles(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.Type()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			out[rel] = "-> " + target
			return err
		case d.IsDir():
			out[rel+"/"] = ""
		default:
			b, err := os.ReadFile(p)
			out[rel] = string(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLocalApplyUndo proves, for every mode against a fake kernel, that apply
// makes every step hold, a second apply changes nothing, and undo brings the
// kernel and the file system back to exactly what they were, leaving what
// was there before the apply in place.
func TestLocalApplyUndo(t *testing.T) {
	ctx := context.Background()
	for name, tg := range goldenTargets() {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			// A file system where /etc/systemd/system already exists with a
			// unit of someone else's, and /etc/ipvsctl does not.
			if err := os.MkdirAll(filepath.Join(root, "etc/systemd/system"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "etc/systemd/system/other.service"), []byte("[Unit]\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			paths := DefaultPaths().UnderRoot(root)
			sys := newFakeSystem()
			// Already there: one sysctl at the wanted value, the first VIP,
			// an operator's default route.
			sys.Sysctl[sysctlKey("ipv4", "all", "arp_ignore")] = "1"
			if len(tg.VIPs) > 0 && tg.Mode == ModeDRSysctl {
				sys.Addrs[hostPrefix(tg.VIPs[0]).String()+" lo"] = true
			}
			sys.Routes[routeKey(netip.MustParsePrefix("0.0.0.0/0"), 0)] = RouteSpec{
				Dst: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("198.18.1.254"), Dev: "eth0", Proto: "static"}
			before, beforeFiles := sys.clone(), snapshotFiles(t, root)

			steps, err := Plan(tg, paths)
			if err != nil {
				t.Fatal(err)
			}
			l := &Local{Sys: sys, Paths: paths, Logger: discard()}
			changed, err := l.Apply(ctx, steps)
			if err != nil {
				t.Fatal(err)
			}
			if len(changed) == 0 {
				t.Fatal("first apply changed nothing")
			}
			if drift, err := l.Check(ctx, steps); err != nil || len(drift) > 0 {
				t.Fatalf("after apply: drift %v, err %v", drift, err)
			}
			if again, err := l.Apply(ctx, steps); err != nil || len(again) > 0 {
				t.Fatalf("second apply: changed %v, err %v; want nothing", again, err)
			}

			if _, err := l.Undo(ctx); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, sys, fakeCmp()); diff != "" {
				t.Errorf("kernel after undo differs from before apply (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(beforeFiles, snapshotFiles(t, root)); diff != "" {
				t.Errorf("files after undo differ from before apply (-before +after):\n%s", diff)
			}
		})
	}
}

// TestLocalUndoFollowsJournalNotPlan: a VIP dropped from the desired state
// after the push is still removed by undo, because undo reads what the real
// server recorded.
func TestLocalUndoFollowsJournalNotPlan(t *testing.T) {
	ctx := context.Background()
	paths := DefaultPaths().UnderRoot(t.TempDir())
	sys := newFakeSystem()
	before := sys.clone()
	tg := goldenTargets()["dr-sysctl"]
	l := &Local{Sys: sys, Paths: paths, Logger: discard()}
	steps, err := Plan(tg, paths)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Apply(ctx, steps); err != nil {
		t.Fatal(err)
	}
	tg.VIPs = tg.VIPs[:1]
	steps, err = Plan(tg, paths)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Apply(ctx, steps); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Undo(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, sys, fakeCmp()); diff != "" {
		t.Errorf("after undo (-before +after):\n%s", diff)
	}
}

// TestLocalDriftAndUndoRetry: a VIP removed behind ipvsctl's back is reported
// with the words the status output shows, and an undo that fails half-way
// keeps its journal and completes when run again.
func TestLocalDriftAndUndoRetry(t *testing.T) {
	ctx := context.Background()
	paths := DefaultPaths().UnderRoot(t.TempDir())
	sys := newFakeSystem()
	before := sys.clone()
	tg := goldenTargets()["dr-sysctl"]
	l := &Local{Sys: sys, Paths: paths, Logger: discard()}
	steps, err := Plan(tg, paths)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Apply(ctx, steps); err != nil {
		t.Fatal(err)
	}
	delete(sys.Addrs, "198.18.0.101/32 lo")
	drift, err := l.Check(ctx, steps)
	if err != nil {
		t.Fatal(err)
	}
	if got := driftSummary(drift); got != "drift: VIP 198.18.0.101 missing on lo" {
		t.Errorf("drift = %q", got)
	}

	sys.failOn = "address 198.18.0.100/32"
	if _, err := l.Undo(ctx); err == nil {
		t.Fatal("undo with a failing step succeeded")
	}
	if _, err := os.Stat(paths.Journal); err != nil {
		t.Fatalf("journal gone after a failed undo: %v", err)
	}
	sys.failOn = ""
	if _, err := l.Undo(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, sys, fakeCmp()); diff != "" {
		t.Errorf("after undo (-before +after):\n%s", diff)
	}
}

func TestParseRouteSpecRoundTrip(t *testing.T) {
	for _, s := range []string{
		"default via 198.18.1.254 dev eth0 proto static",
		"203.0.113.0/24 via 198.18.1.1 dev eth0 proto dhcp src 198.18.1.11 metric 100 onlink",
		"default via 2001:db8::1 dev eth0 proto ra metric 1024",
	} {
		f := strings.Fields(s)
		dst := netip.MustParsePrefix("0.0.0.0/0")
		if strings.Contains(s, "2001:") {
			dst = netip.MustParsePrefix("::/0")
		} else if f[0] != "default" {
			dst = netip.MustParsePrefix(f[0])
		}
		r, err := parseRouteSpec(dst, f)
		if err != nil {
			t.Fatal(err)
		}
		if r.String() != s {
			t.Errorf("round trip of %q gave %q", s, r)
		}
	}
}

func fakeCmp() cmp.Option {
	return cmp.Options{cmpopts.IgnoreFields(fakeSystem{}, "failOn"), cmpopts.EquateEmpty(), cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})}
}
