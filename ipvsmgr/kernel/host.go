package kernel

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// Host is the real director's host: modules with modprobe, sysctls in
// /proc/sys, VIPs with netlink, mangle rules with iptables and ip6tables.
type Host struct {
	// ProcSys and SysModule are where sysctls and loaded modules are read
	// ("" for /proc/sys and /sys/module).
	ProcSys, SysModule string
	// ModulesBuiltin lists the modules built into the kernel ("" for
	// /lib/modules/RELEASE/modules.builtin).
	ModulesBuiltin string
}

func (h Host) procSys() string {
	if h.ProcSys != "" {
		return h.ProcSys
	}
	return "/proc/sys"
}

func (h Host) sysModule() string {
	if h.SysModule != "" {
		return h.SysModule
	}
	return "/sys/module"
}

func (h Host) sysctlPath(key string) string {
	return filepath.Join(h.procSys(), strings.ReplaceAll(key, ".", "/"))
}

// Observe reads what q asks about.
func (h Host) Observe(_ context.Context, q ipvsmgr.HostQuery) (*ipvsmgr.HostState, error) {
	s := &ipvsmgr.HostState{Up: map[ipvsmgr.VIP]bool{}, VIPErr: map[ipvsmgr.VIP]string{},
		Sysctls: map[string]string{}, Modules: map[string]bool{}}
	for _, v := range q.VIPs {
		up, err := hasVIP(v)
		if err != nil {
			s.VIPErr[v] = err.Error()
			continue
		}
		s.Up[v] = up
	}
	for _, k := range q.Sysctls {
		if b, err := os.ReadFile(h.sysctlPath(k)); err == nil {
			s.Sysctls[k] = strings.TrimSpace(string(b))
		}
	}
	var builtin map[string]bool
	for _, m := range q.Modules {
		_, err := os.Stat(filepath.Join(h.sysModule(), m))
		if err != nil && builtin == nil {
			builtin = h.builtinModules()
		}
		s.Modules[m] = err == nil || builtin[m]
	}
	if q.Marks {
		if err := observeMarks(s); err != nil {
			s.MarkErr = err.Error()
		}
	}
	return s, nil
}

// builtinModules are the modules built into the running kernel (not all
// of them show in /sys/module): loading one would change nothing, so the
// plan must not ask for it at every reconcile.
func (h Host) builtinModules() map[string]bool {
	out := map[string]bool{}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return out
	}
	path := h.ModulesBuiltin
	if path == "" {
		path = filepath.Join("/lib/modules", unix.ByteSliceToString(u.Release[:]), "modules.builtin")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	for line := range strings.Lines(string(b)) {
		name := strings.TrimSuffix(filepath.Base(strings.TrimSpace(line)), ".ko")
		out[strings.ReplaceAll(name, "-", "_")] = true
	}
	return out
}

// Apply makes each op, carrying on past failures.
func (h Host) Apply(_ context.Context, ops []ipvsmgr.HostOp) []error {
	errs := make([]error, len(ops))
	for i, op := range ops {
		errs[i] = h.apply(op)
	}
	return errs
}

func (h Host) apply(op ipvsmgr.HostOp) error {
	switch op.Kind {
	case ipvsmgr.HostLoadModule:
		if b, err := exec.Command("modprobe", op.Module).CombinedOutput(); err != nil {
			return fmt.Errorf("modprobe %s: %s: %w", op.Module, strings.TrimSpace(string(b)), err)
		}
		return nil
	case ipvsmgr.HostSetSysctl:
		if err := os.WriteFile(h.sysctlPath(op.Sysctl), []byte(op.Value+"\n"), 0o644); err != nil {
			return fmt.Errorf("set sysctl %s=%s: %w", op.Sysctl, op.Value, err)
		}
		return nil
	case ipvsmgr.HostAddVIP:
		return addVIP(op.VIP)
	case ipvsmgr.HostDelVIP:
		return removeVIP(op.VIP)
	case ipvsmgr.HostAddMark:
		return addMark(op.Mark)
	case ipvsmgr.HostDelMark:
		return delMark(op.MarkID, op.Dup)
	case ipvsmgr.HostDelMarkChain:
		return delMarkChain(op.V6)
	}
	return fmt.Errorf("unknown host op %d", op.Kind)
}

// isNotFound says whether err is netlink's "no such interface".
func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf)
}
