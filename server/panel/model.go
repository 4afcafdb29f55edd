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
	var table *ipvsmgr.Table
	if snap != nil {
		table = snap.Table
	}
	matched := 0
	for i, ss := range server.States(st, sk, dk, table, hs) {
		if ss.InKernel {
			matched++
		}
		row := serviceRow(i, ss, table != nil)
		m.Rows = append(m.Rows, row)
		m.byID[row.ID] = row
		m.count(row)
	}
	if table != nil {
		m.Foreign = len(table.Services) - matched
	}
	return m
}

// serviceRow is the panel's row of service i, in the words the core gives
// it (server.States): its servers, then the removed ones the kernel still
// has (retiring: weight 0 until their connections end).
func serviceRow(i int, ss server.ServiceState, known bool) *svcRow {
	row := &svcRow{Index: i, ID: ss.ID, Name: ss.Name, Key: ss.Key, KeyText: ss.Service, Svc: ss.Desired,
		Enabled: ss.Enabled, Known: known, InKernel: ss.InKernel, State: ss.State, Problem: ss.Reason, SeriesKey: seriesKeySvc(ss.Key)}
	row.search = strings.ToLower(row.Name + "\x00" + row.KeyText + "\x00" + ss.Desired.Address + "\x00" + row.ID)
	if ss.Kernel != nil {
		row.Stats = ss.Kernel.Stats
	}
	for k := range ss.Servers {
		row.add(serverRow(row, &ss.Servers[k]))
	}
	return row
}

// serverRow is the panel's row of one real server of row.
func serverRow(row *svcRow, s *server.ServerState) *srvRow {
	sr := &srvRow{Svc: row, ID: s.ID, Name: s.Name, Addr: s.Address, Server: s.Desired, Admin: s.Admin, Health: s.Health, HealthOf: s.HealthOf,
		Status: s.State, InKernel: s.InKernel, SeriesKey: seriesKeyDest(row.Key, s.Key)}
	if s.State != server.StateDraining { // draining is no problem: the reason says why it drains
		sr.Problem = s.Reason
	}
	if rs := s.Desired; rs != nil {
		sr.CfgWeight, sr.Upper, sr.Lower = rs.EffectiveWeight(), rs.UpperThreshold, rs.LowerThreshold
	}
	sr.search = strings.ToLower(sr.Name + "\x00" + sr.Addr + "\x00" + sr.ID)
	if s.Desired == nil {
		sr.search = strings.ToLower(sr.Addr)
	}
	if d := s.Dest; d != nil {
		sr.KWeight, sr.Active, sr.Inactive, sr.Stats = d.Weight, d.ActiveConns, d.InactiveConns, d.Stats
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
