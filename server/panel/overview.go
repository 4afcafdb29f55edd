package panel

import (
	"net/http"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
)

type overviewData struct {
	T          totals
	Rev        int64
	Foreign    int
	Kernel     *kernelBanner
	Started    time.Time
	Reconcile  *server.ReconcileReport
	Daemon     bool
	Problems   []*svcRow // the first few services with a problem
	MoreProbs  int
	PrepIssues int
}

func (p *Panel) overviewShow(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	m, err := p.model(ctx)
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	d := &overviewData{T: m.Totals, Rev: m.Rev, Foreign: m.Foreign, Kernel: kernelOf(m.Snap), Started: p.started}
	if rep, ok := p.core.LastReconcile(); ok {
		d.Reconcile = &rep
	}
	d.Daemon = m.Snap != nil
	for _, row := range m.Rows {
		if row.Problem != "" {
			if len(d.Problems) < 10 {
				d.Problems = append(d.Problems, row)
			} else {
				d.MoreProbs++
			}
		}
	}
	if rs, err := p.core.RealServerResults(ctx); err == nil {
		for _, res := range rs {
			if !res.OK() {
				d.PrepIssues++
			}
		}
	}
	pg := p.newPage(ctx, r, u, "Overview", "overview")
	pg.Flash = takeFlash(w, r)
	pg.Kernel = nil // the director tile says it
	pg.Data = d
	p.render(w, r, http.StatusOK, "overview", pg)
}
