package server

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// The charts' series, as the daemon's sampler (server/panel/sampler.go)
// keeps them from its snapshot: per virtual service and per real server,
// a point of 16 bytes (active connections, connections/s, packets/s,
// bytes/s as float32) every 10 s for the last hour and every minute (the
// mean) for the last day, ChartChunk series to a stored row.
const (
	ChartResFine    = 10 // seconds per point
	ChartResCoarse  = 60
	ChartKeepFine   = time.Hour
	ChartKeepCoarse = 24 * time.Hour
	ChartPointBytes = 16
	// ChartMissing in a point's first word: the series had no point then.
	ChartMissing = math.MaxUint32
)

// ChartKeyService is the series key of a virtual service.
func ChartKeyService(k ipvsmgr.ServiceKey) string { return "s " + k.String() }

// ChartKeyServer is the series key of a real server of a virtual service.
func ChartKeyServer(k ipvsmgr.ServiceKey, d ipvsmgr.DestKey) string {
	return "d " + k.String() + " " + d.String()
}

// ChartPoint is one sample of a series at T (unix seconds).
type ChartPoint struct {
	T      int64   `json:"t"`
	Active float32 `json:"active"` // active connections
	CPS    float32 `json:"cps"`    // new connections per second
	PPS    float32 `json:"pps"`    // packets per second, in and out
	BPS    float32 `json:"bps"`    // bytes per second, in and out
}

// ChartSeries is what a chart of the panel draws: a series' points over
// its range (the last hour at 10 s, or the last day at 1 min), oldest first.
type ChartSeries struct {
	Service    string       `json:"service"`
	Server     string       `json:"server,omitempty"`
	Key        string       `json:"key"`
	Range      string       `json:"range"`
	Resolution int          `json:"resolution"` // seconds per point
	From       time.Time    `json:"from"`
	To         time.Time    `json:"to"`
	Points     []ChartPoint `json:"points"`
}

// ChartReader is where the series are stored (the store, or the panel's storage).
type ChartReader interface {
	ChartSeriesID(ctx context.Context, key string) (int64, error)
	ChartPoints(ctx context.Context, res int, chunk, since int64) ([]store.ChartRow, error)
}

// ReadChart reads a series' points over rng ("hour" or "day") up to now;
// a series never sampled is store.ErrNotFound.
func ReadChart(ctx context.Context, r ChartReader, key, rng string, now time.Time) (*ChartSeries, error) {
	res, span := ChartResFine, ChartKeepFine
	if rng == "day" {
		res, span = ChartResCoarse, ChartKeepCoarse
	}
	cs := &ChartSeries{Key: key, Range: rng, Resolution: res, From: now.Add(-span), To: now, Points: []ChartPoint{}}
	id, err := r.ChartSeriesID(ctx, key)
	if err != nil {
		return nil, err
	}
	rows, err := r.ChartPoints(ctx, res, id/store.ChartChunk, cs.From.Unix())
	if err != nil {
		return nil, err
	}
	o := int(id%store.ChartChunk) * ChartPointBytes
	for _, row := range rows {
		if len(row.Data) < o+ChartPointBytes || binary.LittleEndian.Uint32(row.Data[o:]) == ChartMissing {
			continue
		}
		f := func(k int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(row.Data[o+4*k:])) }
		cs.Points = append(cs.Points, ChartPoint{T: row.T, Active: f(0), CPS: f(1), PPS: f(2), BPS: f(3)})
	}
	return cs, nil
}

// ChartQuery names a chart: a virtual service, or one of its real servers,
// over the last hour (default) or day.
type ChartQuery struct {
	Service string
	Server  string
	Range   string
}

// Charts reads the series the panel charts on a service's or a real
// server's page.
func (c *Core) Charts(ctx context.Context, q ChartQuery) (*ChartSeries, error) {
	switch q.Range {
	case "":
		q.Range = "hour"
	case "hour", "day":
	default:
		return nil, errorf(CodeBadInput, "range: %q is not hour or day", q.Range)
	}
	if q.Service == "" {
		return nil, errorf(CodeBadInput, "service: give the virtual service whose chart to read")
	}
	st, _, err := c.State(ctx)
	if err != nil {
		return nil, err
	}
	i, err := FindService(st, q.Service)
	if err != nil {
		return nil, err
	}
	sk, dk := KernelKeys(&ipvsmgr.State{Settings: st.Settings, Services: st.Services[i : i+1]})
	key := ChartKeyService(sk[0])
	if q.Server != "" {
		j, err := FindServer(&st.Services[i], q.Server)
		if err != nil {
			return nil, err
		}
		if j >= len(dk[0]) {
			return nil, errorf(CodeNotFound, "real server %q of %q has no kernel key", q.Server, q.Service)
		}
		key = ChartKeyServer(sk[0], dk[0][j])
	}
	cs, err := ReadChart(ctx, c.store, key, q.Range, c.now())
	if errors.Is(err, store.ErrNotFound) { // not sampled yet (or no daemon ran): no points
		span := map[string]time.Duration{"hour": ChartKeepFine, "day": ChartKeepCoarse}[q.Range]
		res := map[string]int{"hour": ChartResFine, "day": ChartResCoarse}[q.Range]
		now := c.now()
		cs, err = &ChartSeries{Key: key, Range: q.Range, Resolution: res, From: now.Add(-span), To: now, Points: []ChartPoint{}}, nil
	}
	if err != nil {
		return nil, err
	}
	cs.Service, cs.Server = q.Service, q.Server
	return cs, nil
}

// KernelKeys gives each service and real server of st its kernel key, as
// the validation computes it (defaults, ports, family), whether or not
// they are enabled.
func KernelKeys(st *ipvsmgr.State) ([]ipvsmgr.ServiceKey, [][]ipvsmgr.DestKey) {
	sk := make([]ipvsmgr.ServiceKey, len(st.Services))
	dk := make([][]ipvsmgr.DestKey, len(st.Services))
	on := true
	for i := range st.Services {
		one := st.Services[i]
		one.Enabled = &on
		one.Servers = make([]ipvsmgr.Server, len(st.Services[i].Servers))
		for j, rs := range st.Services[i].Servers {
			rs.Enabled = &on
			one.Servers[j] = rs
		}
		d, err := ipvsmgr.Compile(&ipvsmgr.State{Settings: st.Settings, Services: []ipvsmgr.Service{one}})
		if err != nil || len(d.Table.Services) != 1 {
			continue // a stored state is valid; an unmatched key shows as "not in kernel"
		}
		vs := d.Table.Services[0]
		sk[i] = vs.Key
		dk[i] = make([]ipvsmgr.DestKey, len(vs.Dests))
		for j, dst := range vs.Dests {
			dk[i][j] = dst.Key
		}
	}
	return sk, dk
}

// ChartSeries gives each key its series id, making the missing ones.
func (c *Core) ChartSeries(ctx context.Context, keys []string, seen int64) (map[string]int64, error) {
	return c.store.ChartSeries(ctx, keys, seen)
}

// ChartSeriesID is key's series id.
func (c *Core) ChartSeriesID(ctx context.Context, key string) (int64, error) {
	return c.store.ChartSeriesID(ctx, key)
}

// SaveChartPoints stores one sample of every series and forgets old ones.
func (c *Core) SaveChartPoints(ctx context.Context, res int, t int64, chunks map[int64][]byte, keepFrom, forgetBefore int64) error {
	return c.store.SaveChartPoints(ctx, res, t, chunks, keepFrom, forgetBefore)
}

// ChartPoints reads one chunk's points since a time.
func (c *Core) ChartPoints(ctx context.Context, res int, chunk, since int64) ([]store.ChartRow, error) {
	return c.store.ChartPoints(ctx, res, chunk, since)
}
