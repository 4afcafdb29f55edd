package panel

import (
	"context"
	"testing"

	"github.com/ipvsctl/ipvsctl/server"
)

// The charts' series the core serves (GET /api/v1/charts, ipvsctl charts)
// are the points the panel draws on the same page, value for value.
func TestChartsOverTheCoreAreWhatThePanelDraws(t *testing.T) {
	e := newEnv(t)
	e.seed(t, webState())
	// A stored row is one second of one chunk (web's three series share
	// it): two rows are two points of the hour's chart.
	waitFor(t, "samples", func() bool {
		rows, _, err := e.st.ChartSize(context.Background())
		return err == nil && rows >= 2
	})
	e.cancel() // no sample between the two reads
	<-e.done
	ctx := context.Background()
	m, err := e.panel.model(ctx)
	if err != nil {
		t.Fatal(err)
	}
	svc := m.byID["web"]
	if svc == nil || len(svc.Servers) != 2 {
		t.Fatalf("model of web: %+v", svc)
	}
	for _, c := range []struct {
		q   server.ChartQuery
		key string
	}{
		{server.ChartQuery{Service: "web"}, svc.SeriesKey},
		{server.ChartQuery{Service: "web", Server: "r2"}, svc.Servers[1].SeriesKey},
		{server.ChartQuery{Service: "tcp:198.18.0.100:80", Server: "198.18.0.12", Range: "day"}, svc.Servers[1].SeriesKey},
	} {
		got, err := e.core.Charts(ctx, c.q)
		if err != nil {
			t.Fatalf("%+v: %v", c.q, err)
		}
		rng := c.q.Range
		if rng == "" {
			rng = "hour"
		}
		drawn := e.panel.charts(ctx, c.key, rng)
		if got.Key != c.key || got.Range != rng || len(drawn) != 4 {
			t.Fatalf("%+v: key %q range %q, want %q; %d charts drawn", c.q, got.Key, got.Range, c.key, len(drawn))
		}
		if rng == "hour" && len(got.Points) < 2 {
			t.Fatalf("%+v: %d points", c.q, len(got.Points))
		}
		// The panel's charts, in order: active, new connections, traffic, packets.
		for i, pt := range got.Points {
			for k, want := range []float32{pt.Active, pt.CPS, pt.BPS, pt.PPS} {
				if drawn[k].N != len(got.Points) || drawn[k].v[i] != want {
					t.Fatalf("%+v: point %d of chart %q: %d points, drawn %v, served %v", c.q, i, drawn[k].Title, drawn[k].N, drawn[k].v, want)
				}
			}
		}
		if rng == "hour" && got.Points[len(got.Points)-1].Active == 0 {
			t.Errorf("%+v: no traffic in the last point: %+v", c.q, got.Points)
		}
	}
	if _, err := e.core.Charts(ctx, server.ChartQuery{Service: "web", Range: "week"}); server.CodeOf(err) != server.CodeBadInput {
		t.Errorf("range week: %v", err)
	}
	if _, err := e.core.Charts(ctx, server.ChartQuery{Service: "web", Server: "r9"}); server.CodeOf(err) != server.CodeNotFound {
		t.Errorf("server r9: %v", err)
	}
}
