package panel

import (
	"context"
	"net/http"
	"time"

	"github.com/ipvsctl/ipvsctl/arpguard"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/tune"
	"github.com/ipvsctl/ipvsctl/server"
)

type tuningData struct {
	View *server.TuneView
	Rows []tuningRow
	Load *loadTestView // the latest load test, if one was recorded
	// CanCheck shows the real servers' Check button (admins); CheckOff,
	// when set, says why it is disabled.
	CanCheck bool
	CheckOff string
	RS       *rsTuneView // a check of the real servers just run
}

type tuningRow struct {
	tune.Finding
	Class, Word string
}

// rsTuneView is `ipvsctl realserver tune check` on the Tuning page: each
// real server's findings, its web servers' with their file:line.
type rsTuneView struct {
	Summary string
	Results []rsTuneResult
	Skipped []server.RealServerSkip
}

type rsTuneResult struct {
	arpguard.TuneResult
	Word, Class string
	Rows        []tuningRow
}

// tuningShow is the Tuning page: `ipvsctl tune check`'s table, read-only
// (applying is `ipvsctl tune apply` on the director).
func (p *Panel) tuningShow(w http.ResponseWriter, r *http.Request, u who) {
	p.tuningPage(w, r, u, nil)
}

// tuningRealServers checks the stored state's real servers over SSH, as
// `ipvsctl realserver tune check` does (read-only, audited), and shows
// their findings on the Tuning page; writing stays the CLI's push --apply.
func (p *Panel) tuningRealServers(w http.ResponseWriter, r *http.Request, u who) {
	// Each real server may take the SSH timeout; the run finishes, and is
	// audited, even if the browser goes away.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(15 * time.Minute))
	ctx := context.WithoutCancel(r.Context())
	rep, err := p.core.TuneRealServers(ctx, p.actor(r, u), server.RealServerTuneCheck, server.RealServerTuneRequest{})
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	v := &rsTuneView{Summary: server.TuneSummary(rep), Skipped: rep.Skipped}
	for _, res := range rep.Results {
		row := rsTuneResult{TuneResult: res, Word: string(res.State), Class: "st-down"}
		switch res.State {
		case arpguard.StatePrepared:
			row.Word, row.Class = "tuned", "st-up"
		case arpguard.StateDrift:
			row.Word, row.Class = "to change", "st-drift"
		}
		row.Rows = tuningRows(res.Findings)
		v.Results = append(v.Results, row)
	}
	p.tuningPage(w, r, u, v)
}

func (p *Panel) tuningPage(w http.ResponseWriter, r *http.Request, u who, rs *rsTuneView) {
	ctx := r.Context()
	v, err := p.core.Tuning(ctx)
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	d := &tuningData{View: v, Load: p.loadTest(ctx), Rows: tuningRows(v.Findings), CanCheck: u.Can("realserver tune"), RS: rs}
	if d.CanCheck {
		d.CheckOff = p.core.RealServerSSHUnavailable()
	}
	pg := p.newPage(ctx, r, u, "Tuning", "tuning")
	pg.Data = d
	p.render(w, r, http.StatusOK, "tuning", pg)
}

func tuningRows(fs []tune.Finding) []tuningRow {
	var rows []tuningRow
	for _, f := range fs {
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
		rows = append(rows, row)
	}
	return rows
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
