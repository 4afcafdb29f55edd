package replication

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// newPrograms says which field of the peer's document would run a program
// this director's document does not already run there ("" for none): an
// exec check's command, on a service or a server. Replication takes such a
// document only where the node setting allow_replicated_exec is on, so that
// whoever answers at the peer's address cannot run commands as root here.
func newPrograms(mine, peer []byte) string {
	ps, err := ipvsmgr.DecodeState(bytes.NewReader(peer))
	if err != nil {
		return "" // Apply refuses it with the field that is wrong
	}
	have := map[string]string{}
	if len(mine) > 0 {
		if ms, err := ipvsmgr.DecodeState(bytes.NewReader(mine)); err == nil {
			for _, p := range programsOf(ms) {
				have[p[0]] = p[1]
			}
		}
	}
	for _, p := range programsOf(ps) {
		if cmd, ok := have[p[0]]; !ok || cmd != p[1] {
			return fmt.Sprintf("%s %s is a program (an exec check, a quorum or notify program) this director does not run", p[0], p[1])
		}
	}
	return ""
}

// programsOf lists a document's exec checks, quorum and notify programs
// (which run as root as well): [where, command] pairs, where
// names the service and server (by name or address) rather than an index,
// so that a reordering is no new program.
func programsOf(st *ipvsmgr.State) [][2]string {
	var out [][2]string
	add := func(where string, c *ipvsmgr.Check) {
		if c == nil || (c.Type != "exec" && len(c.Command) == 0) {
			return
		}
		out = append(out, [2]string{where, fmt.Sprintf("%q", []string(c.Command))})
	}
	argv := func(where string, cmd ipvsmgr.Argv) {
		if len(cmd) > 0 {
			out = append(out, [2]string{where, fmt.Sprintf("%q", []string(cmd))})
		}
	}
	for _, svc := range st.Services {
		sv := "services[" + orDefault(svc.Name, svc.Address) + "]"
		add(sv+".check", svc.Check)
		argv(sv+".quorum_up", svc.QuorumUp)
		argv(sv+".quorum_down", svc.QuorumDown)
		for _, srv := range svc.Servers {
			rs := sv + ".servers[" + orDefault(srv.Name, srv.Address) + "]"
			add(rs+".check", srv.Check)
			argv(rs+".notify_up", srv.NotifyUp)
			argv(rs+".notify_down", srv.NotifyDown)
		}
	}
	if r := st.Settings.Redundancy; r != nil {
		for _, p := range r.Programs() {
			argv("settings.redundancy."+p.Keyword, *p.Argv)
		}
		if g := r.SyncGroup; g != nil {
			for _, p := range g.Programs() {
				argv("settings.redundancy.sync_group."+p.Keyword, *p.Argv)
			}
		}
	}
	slices.SortFunc(out, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
