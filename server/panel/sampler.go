package panel

import (
	"context"
	"encoding/binary"
	"math"
	"sync"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
)

// Chart samples. Every 10 s the sampler takes the daemon's shared snapshot
// (it never reads the kernel) and keeps, per virtual service and per real
// server: active connections, connections/s, packets/s and bytes/s.
//
// Bound: 10 s points for the last hour (360 per series) and 1 min points,
// averaged, for the last day (1,440 per series), 16 bytes a point: at most
// 1,800 x 16 = 28.8 KB per series plus SQLite's overhead (about 2 KB per
// 64-series row). A director with 100 services x 10 real servers keeps about
// 32 MB; with 1,000 x 10, about 320 MB. Older points are deleted as new
// ones come, and series unseen for 25 h are forgotten.
//
// The layout and the reading are the core's (server/core_charts.go), which
// the API's charts read too.
const (
	resFine       = server.ChartResFine // seconds per point
	resCoarse     = server.ChartResCoarse
	keepFine      = server.ChartKeepFine
	keepCoarse    = server.ChartKeepCoarse
	sparkPoints   = 30 // the live table's sparkline: the last 5 minutes
	pointBytes    = server.ChartPointBytes
	forgetSeries  = 25 * time.Hour
	missingMarker = server.ChartMissing
)

type point struct{ active, cps, pps, bps float32 }

type sampler struct {
	p     *Panel
	every time.Duration

	mu     sync.Mutex
	rings  map[string]*ring
	ids    map[string]int64
	idsAt  time.Time
	lastAt time.Time
	minute int64
	acc    map[string]*accum
	gen    uint64 // counts the samples taken into the rings
}

type ring struct {
	v    [sparkPoints]float32
	n, i int
}

type accum struct {
	sum point
	n   int
}

func newSampler(p *Panel) *sampler {
	return &sampler{p: p, every: resFine * time.Second, rings: map[string]*ring{}, acc: map[string]*accum{}}
}

// RunSampler samples the daemon's snapshot into the chart store and the
// live table's sparklines every 10 s until ctx is cancelled.
func (p *Panel) RunSampler(ctx context.Context) {
	s := p.sampler
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		if err := s.sample(ctx); err != nil && ctx.Err() == nil {
			p.log.Error("panel: chart sample", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sample takes one snapshot (if it is new) into the rings and the store.
func (s *sampler) sample(ctx context.Context) error {
	snap := s.p.core.Snapshot()
	if snap == nil || snap.Table == nil || snap.Err != nil {
		return nil // no data is a gap in the charts, not a zero
	}
	s.mu.Lock()
	if !snap.At.After(s.lastAt) {
		s.mu.Unlock()
		return nil
	}
	s.lastAt = snap.At
	s.mu.Unlock()
	pts := snapshotPoints(snap)
	now := snap.At.Unix()
	coarse, coarseAt, needIDs := s.record(now, pts)
	if needIDs {
		if err := s.refreshIDs(ctx, pts, now); err != nil {
			return err
		}
	}
	forget := now - int64(forgetSeries/time.Second)
	if err := s.p.storage.SaveChartPoints(ctx, resFine, now, s.chunks(pts), now-int64(keepFine/time.Second), forget); err != nil {
		return err
	}
	if coarse != nil {
		return s.p.storage.SaveChartPoints(ctx, resCoarse, coarseAt, s.chunks(coarse), now-int64(keepCoarse/time.Second), forget)
	}
	return nil
}

// snapshotPoints is a snapshot's point per real server and per service (its
// active connections the sum of its servers').
func snapshotPoints(snap *server.Snapshot) map[string]point {
	pts := map[string]point{}
	for _, vs := range snap.Table.Services {
		var sp point
		for _, d := range vs.Dests {
			pts[seriesKeyDest(vs.Key, d.Key)] = point{active: float32(d.ActiveConns), cps: float32(d.Stats.CPS),
				pps: float32(d.Stats.InPPS + d.Stats.OutPPS), bps: float32(d.Stats.InBPS + d.Stats.OutBPS)}
			sp.active += float32(d.ActiveConns)
		}
		sp.cps, sp.pps, sp.bps = float32(vs.Stats.CPS), float32(vs.Stats.InPPS+vs.Stats.OutPPS), float32(vs.Stats.InBPS+vs.Stats.OutBPS)
		pts[seriesKeySvc(vs.Key)] = sp
	}
	return pts
}

// record puts the points at now in the sparkline rings (forgetting the
// series gone) and in the minute's sums. When now begins a new minute it
// returns the last minute's means and that minute's time; needIDs says a
// series has no store id yet, or the ids are over a minute old.
func (s *sampler) record(now int64, pts map[string]point) (coarse map[string]point, coarseAt int64, needIDs bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, pt := range pts {
		r := s.rings[k]
		if r == nil {
			r = &ring{}
			s.rings[k] = r
		}
		r.v[r.i] = pt.active
		r.i = (r.i + 1) % sparkPoints
		r.n = min(r.n+1, sparkPoints)
	}
	for k := range s.rings {
		if _, ok := pts[k]; !ok {
			delete(s.rings, k)
		}
	}
	s.gen++
	// Minute points: the mean of the 10 s points of that minute.
	coarseAt = s.minute * resCoarse
	if m := now / resCoarse; m != s.minute {
		if s.minute != 0 && len(s.acc) > 0 {
			coarse = make(map[string]point, len(s.acc))
			for k, a := range s.acc {
				n := float32(a.n)
				coarse[k] = point{a.sum.active / n, a.sum.cps / n, a.sum.pps / n, a.sum.bps / n}
			}
		}
		s.minute, s.acc = m, map[string]*accum{}
	}
	for k, pt := range pts {
		a := s.acc[k]
		if a == nil {
			a = &accum{}
			s.acc[k] = a
		}
		a.sum.active += pt.active
		a.sum.cps += pt.cps
		a.sum.pps += pt.pps
		a.sum.bps += pt.bps
		a.n++
	}
	needIDs = time.Since(s.idsAt) > time.Minute
	for k := range pts {
		if _, ok := s.ids[k]; !ok {
			return coarse, coarseAt, true
		}
	}
	return coarse, coarseAt, needIDs
}

// refreshIDs reads (and makes) the store's ids of the series of pts.
func (s *sampler) refreshIDs(ctx context.Context, pts map[string]point, now int64) error {
	keys := make([]string, 0, len(pts))
	for k := range pts {
		keys = append(keys, k)
	}
	ids, err := s.p.storage.ChartSeries(ctx, keys, now)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.ids, s.idsAt = ids, time.Now()
	s.mu.Unlock()
	return nil
}

// chunks lays points out by series id: ChartChunk series a row, 16 bytes each.
func (s *sampler) chunks(pts map[string]point) map[int64][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int64][]byte{}
	for k, pt := range pts {
		id, ok := s.ids[k]
		if !ok {
			continue
		}
		c := id / server.ChartChunk
		b := out[c]
		if b == nil {
			b = make([]byte, server.ChartChunk*pointBytes)
			for i := 0; i < server.ChartChunk; i++ {
				binary.LittleEndian.PutUint32(b[i*pointBytes:], missingMarker)
			}
			out[c] = b
		}
		o := int(id%server.ChartChunk) * pointBytes
		binary.LittleEndian.PutUint32(b[o:], math.Float32bits(pt.active))
		binary.LittleEndian.PutUint32(b[o+4:], math.Float32bits(pt.cps))
		binary.LittleEndian.PutUint32(b[o+8:], math.Float32bits(pt.pps))
		binary.LittleEndian.PutUint32(b[o+12:], math.Float32bits(pt.bps))
	}
	return out
}

// generation changes whenever the sparklines do.
func (s *sampler) generation() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// spark is a series' last five minutes of active connections as SVG
// polyline points in a 60x16 box ("" with fewer than two points).
func (s *sampler) spark(key string) string {
	s.mu.Lock()
	r := s.rings[key]
	var v []float32
	if r != nil {
		start := (r.i - r.n + sparkPoints) % sparkPoints
		for j := 0; j < r.n; j++ {
			v = append(v, r.v[(start+j)%sparkPoints])
		}
	}
	s.mu.Unlock()
	if len(v) < 2 {
		return ""
	}
	return polyline(v, 60, 16, sparkPoints)
}

// polyline scales values into a w x h box (y grows down), n slots wide.
func polyline(v []float32, w, h float64, n int) string {
	var hi float32
	for _, x := range v {
		if x > hi {
			hi = x
		}
	}
	b := make([]byte, 0, len(v)*12)
	step := w / float64(max(n-1, 1))
	off := float64(n-len(v)) * step
	for i, x := range v {
		y := h - 1
		if hi > 0 {
			y = (h - 1) - float64(x/hi)*(h-2)
		}
		if i > 0 {
			b = append(b, ' ')
		}
		b = appendFloat(b, off+float64(i)*step)
		b = append(b, ',')
		b = appendFloat(b, y)
	}
	return string(b)
}

func appendFloat(b []byte, f float64) []byte {
	return append(b, []byte(trimFloat(f))...)
}

func trimFloat(f float64) string {
	s := make([]byte, 0, 8)
	s = appendFixed(s, f)
	return string(s)
}

func appendFixed(b []byte, f float64) []byte {
	n := int64(math.Round(f * 10))
	if n < 0 {
		b = append(b, '-')
		n = -n
	}
	b = append(b, itoa(int(n/10))...)
	if n%10 != 0 {
		b = append(b, '.', byte('0'+n%10))
	}
	return b
}
