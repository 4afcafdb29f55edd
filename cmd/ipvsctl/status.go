package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/ipvsctl/ipvsctl/arpguard"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// statusService is the JSON shape of one kernel service in `status --json`.
type statusService struct {
	Protocol    string         `json:"protocol,omitempty"`
	Address     string         `json:"address,omitempty"`
	Port        uint16         `json:"port,omitempty"`
	FWMark      uint32         `json:"fwmark,omitempty"`
	Family      string         `json:"family"`
	Scheduler   string         `json:"scheduler"`
	Flags       []string       `json:"flags"`
	Persistence uint32         `json:"persistence"`
	Stats       ipvsmgr.Stats  `json:"stats"`
	Servers     []statusServer `json:"servers"`
}

type statusServer struct {
	Address        string        `json:"address"`
	Port           uint16        `json:"port"`
	Forwarding     string        `json:"forwarding"`
	Weight         uint32        `json:"weight"`
	UpperThreshold uint32        `json:"upper_threshold"`
	LowerThreshold uint32        `json:"lower_threshold"`
	ActiveConns    uint32        `json:"active_conns"`
	InactiveConns  uint32        `json:"inactive_conns"`
	Stats          ipvsmgr.Stats `json:"stats"`
}

type statusView struct {
	// RealServers is the last push/verify/undo result per real server.
	RealServers []arpguard.Result `json:"real_servers"`
	Timeouts    struct {
		TCP    uint32 `json:"tcp"`
		TCPFin uint32 `json:"tcpfin"`
		UDP    uint32 `json:"udp"`
	} `json:"timeouts"`
	Services []statusService `json:"services"`
}

func runStatus(env *cliEnv, args []string) int {
	fs, db := env.newFlagSet("status", "[--json]",
		"Show the kernel's IPVS table: every virtual service and real server with active and inactive\n"+
			"connections, counters and rates (like ipvsadm -Ln --stats --rate).")
	asJSON := fs.Bool("json", false, "print JSON")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "ipvsctl status: takes no arguments")
		return exitUsage
	}
	kc, err := env.openKernel()
	if err != nil {
		return env.fail("status", err, false)
	}
	defer kc.close()
	t, err := kc.kernel.Table(context.Background())
	if err != nil {
		return env.fail("status", err, false)
	}
	v := viewOf(t)
	rs, err := (&arpguard.JSONFileStore{Path: resultsPath(*db)}).Results(context.Background())
	if err != nil {
		fmt.Fprintf(env.stderr, "ipvsctl status: %v\n", err)
	}
	v.RealServers = rs
	if v.RealServers == nil {
		v.RealServers = []arpguard.Result{}
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return env.fail("status", err, false)
		}
		return exitOK
	}
	printStatus(env, v)
	return exitOK
}

func viewOf(t *ipvsmgr.Table) *statusView {
	v := &statusView{Services: []statusService{}}
	v.Timeouts.TCP, v.Timeouts.TCPFin, v.Timeouts.UDP = t.Timeouts.TCP, t.Timeouts.TCPFin, t.Timeouts.UDP
	for _, s := range ipvsmgr.SortedServices(t.Services) {
		ss := statusService{
			FWMark: s.Key.FWMark, Family: "ipv4", Scheduler: s.Scheduler, Flags: ipvsmgr.FlagNames(s),
			Stats: s.Stats, Servers: []statusServer{},
		}
		if s.Key.Family == ipvsmgr.FamilyIPv6 {
			ss.Family = "ipv6"
		}
		if s.Key.FWMark == 0 {
			ss.Protocol, ss.Address, ss.Port = ipvsmgr.ProtocolName(s.Key.Protocol), s.Key.Addr.String(), s.Key.Port
		}
		if s.Flags&ipvsmgr.FlagPersistent != 0 {
			ss.Persistence = s.Timeout
		}
		for _, d := range s.Dests {
			ss.Servers = append(ss.Servers, statusServer{
				Address: d.Key.Addr.String(), Port: d.Key.Port, Forwarding: d.Forward.String(), Weight: d.Weight,
				UpperThreshold: d.UpperThreshold, LowerThreshold: d.LowerThreshold,
				ActiveConns: d.ActiveConns, InactiveConns: d.InactiveConns, Stats: d.Stats,
			})
		}
		v.Services = append(v.Services, ss)
	}
	return v
}

func printStatus(env *cliEnv, v *statusView) {
	fmt.Fprintf(env.stdout, "IP Virtual Server table: %d services (timeouts tcp %ds, tcpfin %ds, udp %ds)\n",
		len(v.Services), v.Timeouts.TCP, v.Timeouts.TCPFin, v.Timeouts.UDP)
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "Prot LocalAddress:Port Scheduler Flags\t\t\tActiveConn\tInActConn\tConns\tInPkts\tOutPkts\tInBytes\tOutBytes\tCPS\tInPPS\tOutPPS\tInBPS\tOutBPS\t")
	fmt.Fprintln(tw, "  -> RemoteAddress:Port\tForward\tWeight\t\t\t\t\t\t\t\t\t\t\t\t\t")
	for _, s := range v.Services {
		name := "FWM  " + strconv.FormatUint(uint64(s.FWMark), 10)
		if s.FWMark == 0 {
			name = fmt.Sprintf("%-4s %s", map[string]string{"tcp": "TCP", "udp": "UDP", "sctp": "SCTP"}[s.Protocol], hostPort(s.Address, s.Port))
		}
		if s.Family == "ipv6" && s.FWMark != 0 {
			name += " IPv6"
		}
		line := name + " " + s.Scheduler
		for _, f := range s.Flags {
			line += " " + f
		}
		var act, inact uint32
		for _, d := range s.Servers {
			act += d.ActiveConns
			inact += d.InactiveConns
		}
		fmt.Fprintf(tw, "%s\t\t\t%d\t%d\t%s\t\n", line, act, inact, statCols(s.Stats))
		for _, d := range s.Servers {
			fmt.Fprintf(tw, "  -> %s\t%s\t%d\t%d\t%d\t%s\t\n", hostPort(d.Address, d.Port), d.Forwarding, d.Weight, d.ActiveConns, d.InactiveConns, statCols(d.Stats))
		}
	}
	tw.Flush()
	if len(v.RealServers) > 0 {
		fmt.Fprintln(env.stdout, "\nReal-server preparation (last push, verify or undo):")
		tw = tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
		for _, r := range v.RealServers {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", r.Target, r.Action, r.At.Local().Format(time.DateTime), r.Summary())
		}
		tw.Flush()
	}
}

func hostPort(addr string, port uint16) string {
	if len(addr) > 0 && addr[0] != '[' && containsColon(addr) {
		return "[" + addr + "]:" + strconv.Itoa(int(port))
	}
	return addr + ":" + strconv.Itoa(int(port))
}

func containsColon(s string) bool {
	for i := range len(s) {
		if s[i] == ':' {
			return true
		}
	}
	return false
}

func statCols(s ipvsmgr.Stats) string {
	return fmt.Sprintf("%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d", s.Conns, s.InPkts, s.OutPkts, s.InBytes, s.OutBytes, s.CPS, s.InPPS, s.OutPPS, s.InBPS, s.OutBPS)
}
