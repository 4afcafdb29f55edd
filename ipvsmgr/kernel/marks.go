package kernel

import (
	"fmt"
	"strings"

	"github.com/coreos/go-iptables/iptables"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// MarkChain is the mangle chain ipvsctl owns; PREROUTING jumps to it.
const MarkChain = ipvsmgr.MarkChain

// The mangle rules that mark packets to fwmark services' VIPs, with
// iptables for IPv4 and ip6tables for IPv6. A rule is known by the id in its
// comment (MarkRule.ID), not by parsing iptables' canonical form.

func family(v6 bool) iptables.Protocol {
	if v6 {
		return iptables.ProtocolIPv6
	}
	return iptables.ProtocolIPv4
}

func newIPTables(v6 bool) (*iptables.IPTables, error) {
	ipt, err := iptables.New(iptables.IPFamily(family(v6)), iptables.Timeout(10))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", map[bool]string{false: "iptables", true: "ip6tables"}[v6], err)
	}
	return ipt, nil
}

// observeMarks lists the rules in both families' chains. A family without
// its tool (no ip6tables on this host) has no chain.
func observeMarks(s *ipvsmgr.HostState) error {
	for i, v6 := range []bool{false, true} {
		ipt, err := newIPTables(v6)
		if err != nil {
			continue
		}
		exists, err := ipt.ChainExists("mangle", MarkChain)
		if err != nil {
			return fmt.Errorf("look up mangle chain %s: %w", MarkChain, err)
		}
		if !exists {
			continue
		}
		s.MarkChain[i] = true
		listed, err := ipt.List("mangle", MarkChain)
		if err != nil {
			return fmt.Errorf("list mangle chain %s: %w", MarkChain, err)
		}
		for _, line := range listed {
			if strings.HasPrefix(line, "-A ") {
				s.Marks = append(s.Marks, commentOf(line))
			}
		}
	}
	return nil
}

// addMark appends r to its family's chain, creating the chain and
// PREROUTING's jump to it as needed.
func addMark(r ipvsmgr.MarkRule) error {
	ipt, err := newIPTables(r.Addr.Is6())
	if err != nil {
		return err
	}
	exists, err := ipt.ChainExists("mangle", MarkChain)
	if err != nil {
		return fmt.Errorf("look up mangle chain %s: %w", MarkChain, err)
	}
	if !exists {
		if err := ipt.NewChain("mangle", MarkChain); err != nil {
			return fmt.Errorf("create mangle chain %s: %w", MarkChain, err)
		}
	}
	if err := ipt.AppendUnique("mangle", MarkChain, r.Spec()...); err != nil {
		return fmt.Errorf("add mark rule %s: %w", r.ID(), err)
	}
	jump := []string{"-j", MarkChain}
	if ok, err := ipt.Exists("mangle", "PREROUTING", jump...); err != nil {
		return fmt.Errorf("look up jump to %s: %w", MarkChain, err)
	} else if !ok {
		if err := ipt.Insert("mangle", "PREROUTING", 1, jump...); err != nil {
			return fmt.Errorf("add jump to %s: %w", MarkChain, err)
		}
	}
	return nil
}

// delMark deletes the rules with id (all but the first with dup).
func delMark(id string, dup bool) error {
	v6 := strings.Count(id, ":") > 4
	ipt, err := newIPTables(v6)
	if err != nil {
		return err
	}
	listed, err := ipt.List("mangle", MarkChain)
	if err != nil {
		return fmt.Errorf("list mangle chain %s: %w", MarkChain, err)
	}
	var at []int
	n := 0
	for _, line := range listed {
		if !strings.HasPrefix(line, "-A ") {
			continue
		}
		n++
		if commentOf(line) == id {
			at = append(at, n)
		}
	}
	if dup && len(at) > 0 {
		at = at[1:]
	}
	for i := len(at) - 1; i >= 0; i-- {
		if err := ipt.DeleteById("mangle", MarkChain, at[i]); err != nil {
			return fmt.Errorf("remove mark rule %s: %w", id, err)
		}
	}
	return nil
}

// delMarkChain deletes the family's chain and PREROUTING's jump to it.
func delMarkChain(v6 bool) error {
	ipt, err := newIPTables(v6)
	if err != nil {
		return err
	}
	if err := ipt.DeleteIfExists("mangle", "PREROUTING", "-j", MarkChain); err != nil {
		return fmt.Errorf("remove jump to %s: %w", MarkChain, err)
	}
	if err := ipt.ClearAndDeleteChain("mangle", MarkChain); err != nil {
		return fmt.Errorf("delete mangle chain %s: %w", MarkChain, err)
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
