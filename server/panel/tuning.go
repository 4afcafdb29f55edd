package panel

import (
	"context"
	"net/http"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/tune"
	"github.com/ipvsctl/ipvsctl/server"
)

type tuningData struct {
	View *server.TuneView
	Rows []tuningRow
	Load *loadTestView // the latest load test, if one was recorded
}

type tuningRow struct {
	tune.Finding
	Class, Word string
}

// tuningShow is the Tuning page: `ipvsctl tune check`'s table, read-only
// (applying is `ipvsctl tune apply` on the director).
func (p *Panel) tuningShow(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	v, err := p.core.Tuning(ctx)
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	d := &tuningData{View: v, Load: p.loadTest(ctx)}
	for _, f := range v.Findings {
		row := tuningRow{Finding: f}
		switch f.Status {
		case tune.OK:
			row.Class, row.Word = "st-up", "ok"
		case tune.Change:
			row.Class, row.Word = "st-drift", "change"
		case tune.Far:
			row.Class, row.Word = "st-down", "far off"
		default:
			row.Class, row.Word = "st-unknown", "info"
		}
		d.Rows = append(d.Rows, row)
	}
	pg := p.newPage(ctx, r, u, "Tuning", "tuning")
	pg.Data = d
	p.render(w, r, http.StatusOK, "tuning", pg)
}

// tuningBadge is the overview's warning when some setting is far off.
type tuningBadge struct {
	Far   int
	First string // the first one's name
}

// tuningBadge checks the director's settings for the overview; a check that
// cannot run shows nothing there (the Tuning page says why).
func (p *Panel) tuningBadge(ctx context.Context) *tuningBadge {
	v, err := p.core.Tuning(ctx)
	if err != nil || !v.FarOff {
		return nil
	}
	b := &tuningBadge{}
	for _, f := range v.Findings {
		if f.Status == tune.Far {
			if b.Far == 0 {
				b.First = f.Setting
			}
			b.Far++
		}
	}
	return b
}
