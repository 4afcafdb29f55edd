package panel

import (
	"context"
	"strings"
	"sync"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
)

// model is the desired state matched with the kernel's snapshot: one per
// (revision, snapshot), shared by every request until either changes.
type model struct {
	Rev    int64
	State  *ipvsmgr.State
	Snap   *server.Snapshot // nil: no snapshot (no daemon, or before its first poll)
	Rows   []*svcRow        // in the desired state's order
	byID   map[string]*svcRow
	Totals totals
	Health healthTotals
	// Foreign are kernel services not in the desired state.
	Foreign int
}

// healthTotals counts the real servers by what their checks say.
type healthTotals struct {
	Up, Down  int // forced too
	Unknown   int // checked, no result yet
	Unchecked int // no check
}

func (h *healthTotals) add(sr *srvRow) {
	switch {
	case sr.HealthOf == nil || sr.HealthOf.Phase == "unchecked":
		h.Unchecked++
	case sr.HealthOf.State == "up":
		h.Up++
	case sr.HealthOf.State == "down":
		h.Down++
	default:
		h.Unknown++
	}
}

type totals struct {
	Services, ServicesProblem, ServicesDisabled              int
	Servers, Up, Down, Draining, Drained, Disabled, Removing int
	Active, Inactive                                         uint64
	CPS, PPS, BPS                                            uint64
}

// svcRow is one virtual service, desired and observed.
type svcRow struct {
	Index   int
	ID      string // how URLs and the core name it
	Name    string
	Key     ipvsmgr.ServiceKey
	KeyText string // -t 198.18.0.100:80
	Svc     *ipvsmgr.Service
	Enabled bool
	// InKernel: the kernel has it; Known: a snapshot exists to say.
	InKernel, Known bool
	State           string // up, degraded, all down, down, disabled, unknown
	Problem         string // why it is a problem ("" when it is not)
	Stats           ipvsmgr.Stats
	Active          uint64
	Inactive        uint64
	Servers         []*srvRow
	SeriesKey       string
	search          string // what the live table's search looks in, lower case
}

// srvRow is one real server of a service (or a removed one the kernel still drains).
type srvRow struct {
	Svc       *svcRow
	ID        string
	Name      string
	Addr      string               // address:port as the kernel has it
	Server    *ipvsmgr.Server      // nil: removed from the desired state, still in the kernel
	Admin     string               // enabled, drained, disabled, removed
	Health    string               // the checks' phase: up, down, going down 2/3, ..., or unchecked
	HealthOf  *server.HealthStatus // nil when the server has no check
	Status    string               // up, down, draining, drained, disabled, full, unknown
	Problem   string
	CfgWeight int
	KWeight   uint32
	InKernel  bool
	Active    uint32
	Inactive  uint32
	Upper     int
	Lower     int
	Stats     ipvsmgr.Stats
	SeriesKey string
	search    string // what the live table's search looks in, lower case
}

func (r *srvRow) AtThreshold() bool { return r.Upper > 0 && int(r.Active) >= r.Upper }

type modelCache struct {
	mu    sync.Mutex
	m     *model
	keyed struct {
		rev    int64
		snap   *server.Snapshot
		health int64
	}
	st struct {
		rev  int64
		st   *ipvsmgr.State
		keys [][]ipvsmgr.DestKey
		sk   []ipvsmgr.ServiceKey
	}
}

// model returns the current model.
func (p *Panel) model(ctx context.Context) (*model, error) { return p.modelAt(ctx, p.core.KeyNow()) }

// modelAt returns the model of what key says the daemon knows, building it
// when the revision, the snapshot or the health moved.
func (p *Panel) modelAt(ctx context.Context, key server.RenderKey) (*model, error) {
	rev, err := p.revOf(ctx, key)
	if err != nil {
		return nil, err
	}
	snap := key.Snap
	c := &p.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m != nil && c.keyed.rev == rev && c.keyed.snap == snap && c.keyed.health == key.Health {
		return c.m, nil
	}
	if c.st.st == nil || c.st.rev < rev {
		st, srev, err := p.core.State(ctx)
		if err != nil {
			return nil, err
		}
		c.st.rev, c.st.st = srev, st
		c.st.sk, c.st.keys = kernelKeys(st)
	}
	hs, _ := p.core.HealthByServer(ctx) // unchecked when it cannot be had
	m := buildModel(c.st.rev, c.st.st, c.st.sk, c.st.keys, snap, hs)
	c.m = m
	c.keyed.rev, c.keyed.snap, c.keyed.health = rev, snap, key.Health
	return m, nil
}

// kernelKeys gives each service and real server of st its kernel key.
func kernelKeys(st *ipvsmgr.State) ([]ipvsmgr.ServiceKey, [][]ipvsmgr.DestKey) {
	return server.KernelKeys(st)
}

func seriesKeySvc(k ipvsmgr.ServiceKey) string { return server.ChartKeyService(k) }
func seriesKeyDest(k ipvsmgr.ServiceKey, d ipvsmgr.DestKey) string {
	return server.ChartKeyServer(k, d)
}

func buildModel(rev int64, st *ipvsmgr.State, sk []ipvsmgr.ServiceKey, dk [][]ipvsmgr.DestKey, snap *server.Snapshot, hs map[ipvsmgr.ServerRef]*server.HealthStatus) *model {
	m := &model{Rev: rev, State: st, Snap: snap, byID: make(map[string]*svcRow, len(st.Services))}
	kernel := map[ipvsmgr.ServiceKey]*ipvsmgr.VirtualService{}
	known := snap != nil && snap.Table != nil
	if known {
		for _, vs := range snap.Table.Services {
			kernel[vs.Key] = vs
		}
	}
	matched := 0
	for i := range st.Services {
		vs := kernel[sk[i]]
		if vs != nil {
			matched++
		}
		row := serviceRow(i, &st.Services[i], sk[i], dk[i], vs, known, hs)
		m.Rows = append(m.Rows, row)
		m.byID[row.ID] = row
		m.count(row)
	}
	if known {
		m.Foreign = len(snap.Table.Services) - matched
	}
	return m
}

// serviceRow is service i of the desired state matched with vs, the
// kernel's (nil when it has none): its servers, then the removed ones the
// kernel still has (retiring: weight 0 until their connections end).
func serviceRow(i int, svc *ipvsmgr.Service, key ipvsmgr.ServiceKey, dk []ipvsmgr.DestKey, vs *ipvsmgr.VirtualService, known bool,
	hs map[ipvsmgr.ServerRef]*server.HealthStatus) *svcRow {
	row := &svcRow{Index: i, ID: server.ServiceID(svc), Name: svc.Name, Key: key, KeyText: key.String(), Svc: svc,
		Enabled: svc.IsEnabled(), Known: known, SeriesKey: seriesKeySvc(key)}
	row.search = strings.ToLower(row.Name + "\x00" + row.KeyText + "\x00" + svc.Address + "\x00" + row.ID)
	dests := map[ipvsmgr.DestKey]*ipvsmgr.Destination{}
	if vs != nil {
		row.InKernel, row.Stats = true, vs.Stats
		for _, d := range vs.Dests {
			dests[d.Key] = d
		}
	}
	serving, shouldServe := 0, 0
	for j := range svc.Servers {
		var dkey ipvsmgr.DestKey
		if j < len(dk) {
			dkey = dk[j]
		}
		sr := serverRow(row, &svc.Servers[j], dkey, dests[dkey], hs[ipvsmgr.ServerRef{Service: key, Server: dkey}])
		delete(dests, dkey)
		wantServe := row.Enabled && sr.Admin == "enabled"
		if wantServe {
			shouldServe++
		}
		sr.Status, sr.Problem = serverStatus(sr, row.Enabled, wantServe, known)
		if sr.Status == "up" {
			serving++
		}
		row.add(sr)
	}
	if vs != nil {
		for _, d := range vs.Dests {
			if dests[d.Key] == nil {
				continue
			}
			sr := &srvRow{Svc: row, ID: d.Key.String(), Addr: d.Key.String(), Admin: "removed", Health: "unchecked",
				InKernel: true, KWeight: d.Weight, Active: d.ActiveConns, Inactive: d.InactiveConns, Stats: d.Stats,
				SeriesKey: seriesKeyDest(key, d.Key), Status: "draining"}
			sr.search = strings.ToLower(sr.Addr)
			row.add(sr)
		}
	}
	row.State, row.Problem = serviceState(row, serving, shouldServe)
	return row
}

// serverRow is one real server of row as configured, with the kernel's
// destination d (nil when it has none) and its health h (nil: unchecked).
func serverRow(row *svcRow, rs *ipvsmgr.Server, key ipvsmgr.DestKey, d *ipvsmgr.Destination, h *server.HealthStatus) *srvRow {
	sr := &srvRow{Svc: row, ID: serverID(rs), Name: rs.Name, Addr: key.String(), Server: rs, Health: "unchecked",
		CfgWeight: rs.EffectiveWeight(), Upper: rs.UpperThreshold, Lower: rs.LowerThreshold, SeriesKey: seriesKeyDest(row.Key, key)}
	if h != nil {
		sr.Health, sr.HealthOf = h.Phase, h
	}
	switch {
	case !rs.IsEnabled():
		sr.Admin = "disabled"
	case rs.Drained || rs.EffectiveWeight() == 0:
		sr.Admin = "drained" // drained, or configured at weight 0
	default:
		sr.Admin = "enabled"
	}
	sr.search = strings.ToLower(sr.Name + "\x00" + sr.Addr + "\x00" + sr.ID)
	if d != nil {
		sr.InKernel, sr.KWeight, sr.Active, sr.Inactive, sr.Stats = true, d.Weight, d.ActiveConns, d.InactiveConns, d.Stats
	}
	return sr
}

// add appends a server row, counting its connections into the service's.
func (row *svcRow) add(sr *srvRow) {
	row.Active += uint64(sr.Active)
	row.Inactive += uint64(sr.Inactive)
	row.Servers = append(row.Servers, sr)
}

// count adds a service row to the model's totals.
func (m *model) count(row *svcRow) {
	t := &m.Totals
	t.Services++
	if !row.Enabled {
		t.ServicesDisabled++
	}
	if row.Problem != "" {
		t.ServicesProblem++
	}
	for _, sr := range row.Servers {
		m.Health.add(sr)
		t.Servers++
		switch sr.Status {
		case "up", "full":
			t.Up++
		case "down":
			t.Down++
		case "draining":
			if sr.Admin == "removed" {
				t.Removing++
			} else {
				t.Draining++
			}
		case "drained":
			t.Drained++
		case "disabled":
			t.Disabled++
		}
	}
	t.Active += row.Active
	t.Inactive += row.Inactive
	t.CPS += row.Stats.CPS
	t.PPS += row.Stats.InPPS + row.Stats.OutPPS
	t.BPS += row.Stats.InBPS + row.Stats.OutBPS
}

func serverID(rs *ipvsmgr.Server) string {
	if rs.Name != "" {
		return rs.Name
	}
	if rs.Port != 0 {
		return rs.Address + ":" + itoa(rs.Port)
	}
	return rs.Address
}

// serverStatus is what a real server is doing, and why that is a problem
// when it is one.
func serverStatus(sr *srvRow, svcEnabled, wantServe, known bool) (string, string) {
	switch {
	case !known:
		return "unknown", ""
	case !svcEnabled:
		if sr.InKernel {
			return "draining", ""
		}
		return "disabled", ""
	case sr.Admin == "disabled":
		if sr.InKernel {
			return "draining", "" // kept at weight 0 until its connections end
		}
		return "disabled", ""
	case sr.Admin == "drained":
		if sr.Active > 0 {
			return "draining", ""
		}
		return "drained", ""
	case !sr.InKernel:
		return "down", "not in the kernel"
	case sr.KWeight == 0:
		return "down", "weight 0 in the kernel"
	case sr.AtThreshold():
		return "full", "at its connection limit"
	}
	return "up", ""
}

func serviceState(row *svcRow, serving, shouldServe int) (string, string) {
	switch {
	case !row.Enabled:
		return "disabled", ""
	case !row.Known:
		return "unknown", ""
	case !row.InKernel:
		return "down", "not in the kernel"
	case len(row.Servers) == 0:
		return "all down", "no real servers"
	case serving == 0:
		return "all down", "no real server takes traffic"
	case serving < shouldServe:
		return "degraded", itoa(shouldServe-serving) + " of " + itoa(shouldServe) + " real servers not taking traffic"
	}
	return "up", ""
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}
