package panel

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
)

// chartView is one chart drawn as inline SVG (no script: it works with
// JavaScript off, and under the CSP).
type chartView struct {
	Title    string
	Unit     string
	Points   string
	Max      string
	Last     string
	From, To string
	N        int
	Range    string
	// Left is where the plot starts: right of the widest value label.
	Left, LabelX int

	v  []float32
	hi float32
}

// chartRight is where the plot ends; the SVG is 610 wide.
const chartRight = 600

// chartLeft is the plot's left edge for a value label: the label ends 4
// units left of it and must not start left of the SVG (a value is at most
// "999.9 MB" or a count like "12,345,678", about 6.5 units a character at
// the chart's 10 px font).
func chartLeft(label string) int {
	return max(40, (len(label)*13+1)/2+8)
}

func chartRange(r *http.Request) string {
	if r.URL.Query().Get("range") == "day" {
		return "day"
	}
	return "hour"
}

// charts draws a series' stored points (the core's ReadChart, which the
// API serves too): the last hour at 10 s, or the last day at 1 min.
func (p *Panel) charts(ctx context.Context, key, rng string) []chartView {
	now := time.Now()
	series, err := server.ReadChart(ctx, p.storage, key, rng, now)
	if errors.Is(err, server.ErrNotFound) {
		return nil // never sampled: no charts
	}
	if err != nil {
		p.log.Error("panel: read chart", "series", key, "err", err)
		return nil
	}
	ts := make([]int64, 0, len(series.Points))
	var vals [4][]float32
	for _, pt := range series.Points {
		ts = append(ts, pt.T)
		vals[0], vals[1] = append(vals[0], pt.Active), append(vals[1], pt.CPS)
		vals[2], vals[3] = append(vals[2], pt.PPS), append(vals[3], pt.BPS)
	}
	from, to := series.From, series.To
	mk := func(title, unit string, v []float32, fmtv func(float32) string) chartView {
		c := chartView{Title: title, Unit: unit, N: len(v), From: from.Local().Format("15:04"), To: to.Local().Format("15:04"), Range: rng}
		if rng == "day" {
			c.From = from.Local().Format("Jan 2 15:04")
		}
		for _, x := range v {
			c.hi = max(c.hi, x)
		}
		c.Max = fmtv(c.hi)
		if len(v) > 0 {
			c.Last = fmtv(v[len(v)-1])
		}
		c.v = v
		return c
	}
	num := func(x float32) string { return fmtNum(float64(x)) }
	cs := []chartView{
		mk("Active connections", "", vals[0], num),
		mk("New connections", "/s", vals[1], func(x float32) string { return fmtRate(uint64(x)) }),
		mk("Traffic", "bytes/s", vals[3], func(x float32) string { return fmtBytes(uint64(x)) }),
		mk("Packets", "/s", vals[2], func(x float32) string { return fmtRate(uint64(x)) }),
	}
	// One left edge for all, right of the widest value: the charts line up.
	left := 0
	for _, c := range cs {
		left = max(left, chartLeft(c.Max))
	}
	for i := range cs {
		c := &cs[i]
		c.Left, c.LabelX = left, left-4
		c.Points = timePolyline(ts, c.v, from.Unix(), to.Unix(), c.hi, left)
	}
	return cs
}

// timePolyline places points by time in the plot area (x left..600, y 10..110).
func timePolyline(ts []int64, v []float32, from, to int64, hi float32, left int) string {
	if len(v) == 0 || to <= from {
		return ""
	}
	b := make([]byte, 0, len(v)*14)
	for i, x := range v {
		px := float64(left) + float64(ts[i]-from)/float64(to-from)*float64(chartRight-left)
		py := 110.0
		if hi > 0 {
			py = 110 - float64(x/hi)*100
		}
		if i > 0 {
			b = append(b, ' ')
		}
		b = appendFixed(b, px)
		b = append(b, ',')
		b = appendFixed(b, py)
	}
	return string(b)
}
