package panel

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
)

// The Tuning page's load test: the latest test's runs as marked through the
// core (ipvsctl loadtest start/end, which scripts/loadtest.sh --lab calls),
// with the figures the load generator printed, and the sampler's charts of
// each service the runs went through over the test's span, every run
// shaded with its phase.

type loadTestView struct {
	Test     string
	Runs     []loadRunRow
	Charts   []loadChart
	From, To string
}

type loadRunRow struct {
	ID                                 int64
	Phase, WebPhase                    string
	Service, Tool, Started, Secs       string
	RPS, P50, P99, CPU, Softirq, Table string
	Errors                             string
	Ended                              bool
}

// loadChart is one series over the test's span (x from Left to 600, y 10
// to 110, as the service page's charts).
type loadChart struct {
	Service, Title, Unit string
	Max, Points          string
	Left, LabelX         int
	N                    int
	Bands                []loadBand
}

// loadBand is a run's span on a chart.
type loadBand struct {
	X, W, TextY string
	Phase, Text string
	Fill        string
}

// loadPad is the time shown before the first run and after the last: a
// tenth of the test's length, between 2 and 30 s.
func loadPad(span time.Duration) time.Duration {
	return min(max(span/10, 2*time.Second), 30*time.Second)
}

func (p *Panel) loadTest(ctx context.Context) *loadTestView {
	runs, err := p.core.LoadRuns(ctx, "")
	if err != nil {
		p.log.Error("panel: read load runs", "err", err)
		return nil
	}
	if len(runs) == 0 {
		return nil
	}
	now := time.Now()
	last := runs[0].StartedAt
	v := &loadTestView{Test: runs[0].Test}
	for _, r := range runs {
		row := loadRunRow{ID: r.ID, Phase: r.Phase, WebPhase: r.WebPhase, Service: r.Service, Tool: r.Tool, Started: r.StartedAt.Local().Format("15:04:05"),
			Secs: "running", RPS: "-", P50: "-", P99: "-", CPU: "-", Softirq: "-", Table: "-"}
		end := now
		if r.EndedAt != nil {
			end, row.Ended = *r.EndedAt, true
			row.Secs = strconv.FormatFloat(r.EndedAt.Sub(r.StartedAt).Seconds(), 'f', 0, 64) + " s"
		}
		if end.After(last) {
			last = end
		}
		if x := r.Result; x != nil {
			row.RPS = fmtNum(x.RPS)
			row.P50, row.P99 = fmtMs(x.P50ms), fmtMs(x.P99ms)
			row.CPU, row.Softirq = fmt.Sprintf("%.0f%%", 100*x.CPU), fmt.Sprintf("%.0f%%", 100*x.Softirq)
			row.Table = fmt.Sprintf("%s / %s", fmtNum(x.Entries), fmtNum(x.Buckets))
			row.Errors = x.Errors
		}
		v.Runs = append(v.Runs, row)
	}
	pad := loadPad(last.Sub(runs[0].StartedAt))
	from, to := runs[0].StartedAt.Add(-pad), now
	if t := last.Add(pad); t.Before(to) {
		to = t
	}
	v.From, v.To = from.Local().Format("15:04:05"), to.Local().Format("15:04:05")
	rng := "hour"
	if now.Sub(from) > server.ChartKeepFine {
		rng = "day"
	}
	seen := map[string]bool{}
	for _, r := range runs {
		if seen[r.Service] {
			continue
		}
		seen[r.Service] = true
		cs, err := p.core.Charts(ctx, server.ChartQuery{Service: r.Service, Range: rng})
		if err != nil {
			p.log.Error("panel: read a load test's chart", "service", r.Service, "err", err)
			continue
		}
		v.Charts = append(v.Charts, loadCharts(r.Service, cs, runs, from, to)...)
	}
	return v
}

// loadCharts draws a service's new connections a second and active
// connections over [from, to], with the runs through it as bands.
func loadCharts(svc string, cs *server.ChartSeries, runs []server.LoadRun, from, to time.Time) []loadChart {
	var ts []int64
	var cps, active []float32
	for _, pt := range cs.Points {
		if pt.T < from.Unix() || pt.T > to.Unix() {
			continue
		}
		ts, cps, active = append(ts, pt.T), append(cps, pt.CPS), append(active, pt.Active)
	}
	out := []loadChart{
		{Service: svc, Title: "New connections of " + svc, Unit: "/s"},
		{Service: svc, Title: "Active connections of " + svc},
	}
	for i, v := range [][]float32{cps, active} {
		c := &out[i]
		var hi float32
		for _, x := range v {
			hi = max(hi, x)
		}
		c.Max, c.N = fmtNum(float64(hi)), len(v)
		c.Left = chartLeft(c.Max)
		c.LabelX = c.Left - 4
		c.Points = timePolyline(ts, v, from.Unix(), to.Unix(), hi, c.Left)
		span := float64(to.Unix() - from.Unix())
		for _, r := range runs {
			if r.Service != svc || span <= 0 {
				continue
			}
			// Labels alternate between two lines: short runs side by side stay readable.
			textY := strconv.Itoa(22 + 12*(len(c.Bands)%2))
			end := to
			if r.EndedAt != nil {
				end = *r.EndedAt
			}
			w := float64(chartRight - c.Left)
			x0 := float64(c.Left) + float64(r.StartedAt.Unix()-from.Unix())/span*w
			x1 := float64(c.Left) + float64(end.Unix()-from.Unix())/span*w
			b := loadBand{X: strconv.FormatFloat(x0, 'f', 1, 64), W: strconv.FormatFloat(max(x1-x0, 1), 'f', 1, 64), Phase: r.Phase,
				Text: loadBandText(&r), Fill: "#9aa5b1", TextY: textY}
			if r.Phase == server.PhaseTuned {
				b.Fill = "#2f6fdf"
			}
			c.Bands = append(c.Bands, b)
		}
	}
	return out
}

func fmtMs(ms float64) string {
	if ms >= 1000 {
		return strconv.FormatFloat(ms/1000, 'f', 2, 64) + " s"
	}
	return strconv.FormatFloat(ms, 'f', 1, 64) + " ms"
}

// loadBandText labels a run's band: its number and phase, and its web
// tier's when the run said it.
func loadBandText(r *server.LoadRun) string {
	if r.WebPhase == "" {
		return fmt.Sprintf("run %d %s", r.ID, r.Phase)
	}
	return fmt.Sprintf("run %d %s, web %s", r.ID, r.Phase, r.WebPhase)
}
