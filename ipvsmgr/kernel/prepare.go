package kernel

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// Preparation is what a desired state needs from the kernel besides the IPVS
// table: modules and sysctls.
type Preparation struct {
	Modules []string          // ip_vs and one ip_vs_SCHED per scheduler used
	Sysctls map[string]string // /proc/sys path (dotted) -> value
}

// Prepare lists what d needs: ip_vs and its schedulers' modules, forwarding
// for NAT, and the IPVS timeouts are set through netlink by the reconcile.
func Prepare(d *ipvsmgr.Desired) Preparation {
	p := Preparation{Modules: []string{"ip_vs"}, Sysctls: map[string]string{}}
	seen := map[string]bool{}
	for _, s := range d.Table.Services {
		if !seen[s.Scheduler] {
			seen[s.Scheduler] = true
			p.Modules = append(p.Modules, "ip_vs_"+s.Scheduler)
		}
		for _, dst := range s.Dests {
			if dst.Forward != ipvsmgr.ForwardNAT {
				continue
			}
			// A NAT director routes the real servers' replies back to the clients.
			if s.Key.Family == ipvsmgr.FamilyIPv6 {
				p.Sysctls["net.ipv6.conf.all.forwarding"] = "1"
			} else {
				p.Sysctls["net.ipv4.ip_forward"] = "1"
			}
		}
	}
	if d.Settings.BGP != nil {
		bgpSysctls(d, p.Sysctls)
	}
	sort.Strings(p.Modules[1:])
	return p
}

// Apply loads the modules and sets the sysctls, carrying on past failures; it
// returns one failure per thing it could not do.
func (p Preparation) Apply() []ipvsmgr.Failure {
	var out []ipvsmgr.Failure
	for _, m := range p.Modules {
		if _, err := os.Stat("/sys/module/" + m); err == nil {
			continue
		}
		if b, err := exec.Command("modprobe", m).CombinedOutput(); err != nil {
			out = append(out, ipvsmgr.Failure{Service: "kernel", Change: "modprobe " + m, Err: strings.TrimSpace(string(b) + " " + err.Error())})
		}
	}
	keys := make([]string, 0, len(p.Sysctls))
	for k := range p.Sysctls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		path := "/proc/sys/" + strings.ReplaceAll(k, ".", "/")
		if cur, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(cur)) == p.Sysctls[k] {
			continue
		}
		if err := os.WriteFile(path, []byte(p.Sysctls[k]+"\n"), 0o644); err != nil {
			out = append(out, ipvsmgr.Failure{Service: "kernel", Change: fmt.Sprintf("sysctl %s=%s", k, p.Sysctls[k]), Err: err.Error()})
		}
	}
	return out
}

// bgpSysctls are what a director of a BGP group needs: IPVS schedules a flow
// it has never seen on a packet that is not its first (another director's
// established flow, after ECMP moved it), and no director answers ARP for
// the VIPs it holds on the loopback.
func bgpSysctls(d *ipvsmgr.Desired, sysctls map[string]string) {
	sysctls["net.ipv4.vs.sloppy_tcp"] = "1"
	for _, s := range d.Table.Services {
		if s.Key.Protocol == ipvsmgr.ProtoSCTP {
			sysctls["net.ipv4.vs.sloppy_sctp"] = "1"
		}
	}
	sysctls["net.ipv4.conf.all.arp_ignore"] = "1"
	sysctls["net.ipv4.conf.all.arp_announce"] = "2"
}
