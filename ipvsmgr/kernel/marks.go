package kernel

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/coreos/go-iptables/iptables"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// MarkChain is the mangle chain ipvsctl owns; PREROUTING jumps to it.
const MarkChain = "IPVSCTL-FWMARK"

// Marks keeps the mangle rules that mark packets to fwmark services' VIPs,
// with iptables for IPv4 and ip6tables for IPv6.
type Marks struct{}

// markRule is one rule: its spec and the id carried in its comment, which is
// how a listed rule is recognised without parsing iptables' canonical form.
type markRule struct {
	id   string
	spec []string
}

func markRules(rules []ipvsmgr.MarkRule, v6 bool) []markRule {
	var out []markRule
	for _, r := range rules {
		if r.Addr.Is6() != v6 {
			continue
		}
		ports := make([]string, len(r.Ports))
		for i, p := range r.Ports {
			ports[i] = strconv.Itoa(p)
		}
		bits := "/32"
		if v6 {
			bits = "/128"
		}
		id := fmt.Sprintf("ipvsctl:%d:%s:%s:%s", r.Mark, r.Protocol, strings.Join(ports, ","), r.Addr)
		out = append(out, markRule{id: id, spec: []string{
			"-d", r.Addr.String() + bits, "-p", r.Protocol, "-m", "multiport", "--dports", strings.Join(ports, ","),
			"-m", "comment", "--comment", id, "-j", "MARK", "--set-mark", strconv.FormatUint(uint64(r.Mark), 10),
		}})
	}
	return out
}

// SyncMarks makes the chain hold exactly rules: missing rules are appended
// before stale ones are deleted, so no packet of a kept rule goes unmarked.
func (Marks) SyncMarks(_ context.Context, rules []ipvsmgr.MarkRule) error {
	for _, proto := range []iptables.Protocol{iptables.ProtocolIPv4, iptables.ProtocolIPv6} {
		want := markRules(rules, proto == iptables.ProtocolIPv6)
		if err := syncFamily(proto, want); err != nil {
			return err
		}
	}
	return nil
}

// PlanMarks lists the commands SyncMarks would run, changing nothing.
func (Marks) PlanMarks(_ context.Context, rules []ipvsmgr.MarkRule) ([]string, error) {
	var out []string
	for _, proto := range []iptables.Protocol{iptables.ProtocolIPv4, iptables.ProtocolIPv6} {
		cmd := "iptables"
		if proto == iptables.ProtocolIPv6 {
			cmd = "ip6tables"
		}
		want := markRules(rules, proto == iptables.ProtocolIPv6)
		ipt, err := iptables.New(iptables.IPFamily(proto), iptables.Timeout(10))
		if err != nil {
			if len(want) == 0 {
				continue
			}
			return nil, fmt.Errorf("iptables: %w", err)
		}
		exists, err := ipt.ChainExists("mangle", MarkChain)
		if err != nil {
			return nil, fmt.Errorf("look up mangle chain %s: %w", MarkChain, err)
		}
		have := map[string]bool{}
		if exists {
			listed, err := ipt.List("mangle", MarkChain)
			if err != nil {
				return nil, fmt.Errorf("list mangle chain %s: %w", MarkChain, err)
			}
			for _, line := range listed {
				if strings.HasPrefix(line, "-A ") {
					have[commentOf(line)] = true
				}
			}
		}
		ids := map[string]bool{}
		for _, r := range want {
			ids[r.id] = true
			if !have[r.id] {
				out = append(out, cmd+" -t mangle -A "+MarkChain+" "+strings.Join(r.spec, " "))
			}
		}
		var stale []string
		for id := range have {
			if !ids[id] {
				stale = append(stale, cmd+" -t mangle -D "+MarkChain+" (rule "+id+")")
			}
		}
		slices.Sort(stale)
		out = append(out, stale...)
		if len(want) == 0 && exists {
			out = append(out, cmd+" -t mangle -X "+MarkChain)
		}
	}
	return out, nil
}

func syncFamily(proto iptables.Protocol, want []markRule) error {
	ipt, err := iptables.New(iptables.IPFamily(proto), iptables.Timeout(10))
	if err != nil {
		if len(want) == 0 {
			return nil // no ip6tables on this host and nothing to mark
		}
		return fmt.Errorf("iptables: %w", err)
	}
	exists, err := ipt.ChainExists("mangle", MarkChain)
	if err != nil {
		return fmt.Errorf("look up mangle chain %s: %w", MarkChain, err)
	}
	jump := []string{"-j", MarkChain}
	if len(want) == 0 {
		if !exists {
			return nil
		}
		if err := ipt.DeleteIfExists("mangle", "PREROUTING", jump...); err != nil {
			return fmt.Errorf("remove jump to %s: %w", MarkChain, err)
		}
		return ipt.ClearAndDeleteChain("mangle", MarkChain)
	}
	if !exists {
		if err := ipt.NewChain("mangle", MarkChain); err != nil {
			return fmt.Errorf("create mangle chain %s: %w", MarkChain, err)
		}
	}
	ids := map[string]bool{}
	for _, r := range want {
		ids[r.id] = true
		if err := ipt.AppendUnique("mangle", MarkChain, r.spec...); err != nil {
			return fmt.Errorf("add mark rule %s: %w", r.id, err)
		}
	}
	if ok, err := ipt.Exists("mangle", "PREROUTING", jump...); err != nil {
		return fmt.Errorf("look up jump to %s: %w", MarkChain, err)
	} else if !ok {
		if err := ipt.Insert("mangle", "PREROUTING", 1, jump...); err != nil {
			return fmt.Errorf("add jump to %s: %w", MarkChain, err)
		}
	}
	listed, err := ipt.List("mangle", MarkChain)
	if err != nil {
		return fmt.Errorf("list mangle chain %s: %w", MarkChain, err)
	}
	var stale []int
	seen := map[string]bool{}
	n := 0
	for _, line := range listed {
		if !strings.HasPrefix(line, "-A ") {
			continue
		}
		n++
		id := commentOf(line)
		if !ids[id] || seen[id] {
			stale = append(stale, n)
		}
		seen[id] = true
	}
	for i := len(stale) - 1; i >= 0; i-- {
		if err := ipt.DeleteById("mangle", MarkChain, stale[i]); err != nil {
			return fmt.Errorf("remove stale mark rule %d: %w", stale[i], err)
		}
	}
	return nil
}

func commentOf(line string) string {
	_, rest, ok := strings.Cut(line, "--comment ")
	if !ok {
		return ""
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return ""
	}
	return strings.Trim(f[0], `"`)
}
