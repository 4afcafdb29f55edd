package kernel

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// The real host's sysctls and modules, over directories laid out as
// /proc/sys and /sys/module are: Observe reads them (a module built into the
// kernel counts as loaded), Apply writes a sysctl.
func TestHostSysctlsAndModules(t *testing.T) {
	dir := t.TempDir()
	h := Host{ProcSys: filepath.Join(dir, "sys"), SysModule: filepath.Join(dir, "module"), ModulesBuiltin: filepath.Join(dir, "modules.builtin")}
	os.WriteFile(h.ModulesBuiltin, []byte("kernel/net/netfilter/ipvs/ip_vs_rr.ko\n"), 0o644)
	fwd := filepath.Join(h.ProcSys, "net/ipv4/ip_forward")
	if err := os.MkdirAll(filepath.Dir(fwd), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(fwd, []byte("0\n"), 0o644)
	os.MkdirAll(filepath.Join(h.SysModule, "ip_vs"), 0o755)
	ctx := context.Background()
	q := ipvsmgr.HostQuery{Sysctls: []string{"net.ipv4.ip_forward"}, Modules: []string{"ip_vs", "ip_vs_wlc", "ip_vs_rr"}}
	s, err := h.Observe(ctx, q)
	if err != nil || s.Sysctls["net.ipv4.ip_forward"] != "0" || !s.Modules["ip_vs"] || s.Modules["ip_vs_wlc"] || !s.Modules["ip_vs_rr"] {
		t.Fatalf("observed %+v, %v", s, err)
	}
	errs := h.Apply(ctx, []ipvsmgr.HostOp{{Kind: ipvsmgr.HostSetSysctl, Sysctl: "net.ipv4.ip_forward", Value: "1"},
		{Kind: ipvsmgr.HostSetSysctl, Sysctl: "net.ipv6.conf.all.forwarding", Value: "1"}})
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	if b, _ := os.ReadFile(fwd); string(b) != "1\n" {
		t.Fatalf("ip_forward = %q", b)
	}
	if errs[1] == nil {
		t.Fatal("a sysctl the kernel lacks was set")
	}
	t.Logf("error shown for a missing sysctl: %v", errs[1])
}
