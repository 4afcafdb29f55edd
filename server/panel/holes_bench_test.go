package panel

import (
	"bytes"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
)

// holesBench is what the benchmarks of holes.go render: the two pages that
// use holes (the overview, the live table's polled fragment), at 1,000
// virtual services x 10 real servers, each rendered both ways from the same
// prepared data, so that the figures compare holes with html/template alone
// (the data is built once either way; its cache is not what is measured).
type holesBench struct {
	e *env
}

func newHolesBench(tb testing.TB) *holesBench {
	if os.Getenv("IPVSCTL_PANEL_BENCH") == "" {
		testenv.OptIn(tb, "set IPVSCTL_PANEL_BENCH=1 to measure holes.go against html/template")
	}
	e := newEnvTimed(tb, true)
	e.seed(tb, bigState())
	waitFor(tb, "the big table in the kernel", func() bool {
		m, err := e.panel.model(tb.Context())
		return err == nil && len(m.Rows) == 1000 && m.Rows[999].InKernel
	})
	return &holesBench{e: e}
}

// overview is the overview's two renderers: filling the holes of the
// shared rendering, and executing the template with the request's values.
func (hb *holesBench) overview(tb testing.TB) (holed, plain func(*bytes.Buffer)) {
	p := hb.e.panel
	r := httptest.NewRequest("GET", "/", nil)
	u := whoOf("alice", "admin")
	key := p.core.KeyNow()
	draft := p.draftBanner(r.Context(), u, key)
	op, err := p.overviewShared(r, u, key, draft)
	if err != nil {
		tb.Fatal(err)
	}
	pg, err := p.overviewPageOf(r, u, key, draft, nil)
	if err != nil {
		tb.Fatal(err)
	}
	holed = func(buf *bytes.Buffer) {
		now := time.Now()
		var vals [overviewHoles]string
		vals[holeUser] = u.User
		vals[holeAge] = ageText(now.Sub(op.snapAt))
		vals[holeStartedAgo] = agoAt(p.started, now)
		if op.hasReconciled {
			vals[holeReconcileAgo] = agoAt(op.reconcileAt, now)
		}
		buf.Reset()
		buf.Grow(op.page.size(vals[:]))
		buf.Write(op.page.fill(buf.AvailableBuffer(), vals[:]))
	}
	plain = func(buf *bytes.Buffer) {
		now := time.Now()
		d := pg.Data.(*overviewData)
		d.Age = ageText(now.Sub(key.Snap.At))
		d.StartedAgo = agoAt(p.started, now)
		if d.Reconcile != nil {
			d.ReconcileAgo = agoAt(d.Reconcile.At, now)
		}
		buf.Reset()
		if err := p.execute(buf, r, "overview", "layout", pg); err != nil {
			tb.Fatal(err)
		}
	}
	return holed, plain
}

// liveRows is the live fragment's two renderers, as overview's.
func (hb *holesBench) liveRows(tb testing.TB) (holed, plain func(*bytes.Buffer)) {
	p := hb.e.panel
	r := httptest.NewRequest("GET", "/live/rows", nil)
	u := whoOf("alice", "admin")
	m, err := p.model(r.Context())
	if err != nil {
		tb.Fatal(err)
	}
	kb := kernelOf(m.Snap)
	d := p.liveDataOf(r, u, m, kb)
	d.Age = p.holes.mark(0)
	b, err := p.renderBytes(r, "live_rows", "live_rows", d)
	if err != nil {
		tb.Fatal(err)
	}
	hp := p.holes.split(b)
	dp := p.liveDataOf(r, u, m, kb)
	holed = func(buf *bytes.Buffer) {
		vals := []string{kb.Age}
		buf.Reset()
		buf.Grow(hp.size(vals))
		buf.Write(hp.fill(buf.AvailableBuffer(), vals))
	}
	plain = func(buf *bytes.Buffer) {
		dp.Age = kb.Age
		buf.Reset()
		if err := p.execute(buf, r, "live_rows", "live_rows", dp); err != nil {
			tb.Fatal(err)
		}
	}
	return holed, plain
}

func benchRender(b *testing.B, render func(*bytes.Buffer)) {
	var buf bytes.Buffer
	render(&buf)
	b.SetBytes(int64(buf.Len()))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		render(&buf)
	}
}

// BenchmarkHoles renders each page that uses holes both ways.
func BenchmarkHoles(b *testing.B) {
	hb := newHolesBench(b)
	for _, pg := range []struct {
		name  string
		pages func(testing.TB) (func(*bytes.Buffer), func(*bytes.Buffer))
	}{{"overview", hb.overview}, {"live-rows", hb.liveRows}} {
		holed, plain := pg.pages(b)
		b.Run(pg.name+"/holes", func(b *testing.B) { benchRender(b, holed) })
		b.Run(pg.name+"/template", func(b *testing.B) { benchRender(b, plain) })
	}
}

// TestHolesRatio prints how many times faster filling holes is than
// executing html/template, per page (IPVSCTL_PANEL_BENCH=1 to run); the
// figure is in holes.go's comment.
func TestHolesRatio(t *testing.T) {
	hb := newHolesBench(t)
	for _, pg := range []struct {
		name  string
		pages func(testing.TB) (func(*bytes.Buffer), func(*bytes.Buffer))
	}{{"overview", hb.overview}, {"live-rows", hb.liveRows}} {
		holed, plain := pg.pages(t)
		h := testing.Benchmark(func(b *testing.B) { benchRender(b, holed) })
		x := testing.Benchmark(func(b *testing.B) { benchRender(b, plain) })
		var buf bytes.Buffer
		holed(&buf)
		t.Logf("%s (%d bytes): holes %v/op %d allocs, html/template %v/op %d allocs: holes %.1fx faster",
			pg.name, buf.Len(), time.Duration(h.NsPerOp()), h.AllocsPerOp(), time.Duration(x.NsPerOp()), x.AllocsPerOp(),
			float64(x.NsPerOp())/float64(h.NsPerOp()))
	}
}
