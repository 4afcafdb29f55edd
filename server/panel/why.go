package panel

import (
	"net/http"

	"github.com/ipvsctl/ipvsctl/server"
)

// check is one of the core's why checks, as the page shows it.
type check struct {
	What     string
	Blocking bool // this stops traffic
	Unknown  bool // cannot tell
	Reason   server.WhyReason
	Detail   string // what was found
}

type whyData struct {
	SvcID, ID string
	Addr      string
	Checks    []check
	Verdict   string
	Blocked   int
}

// whyShow answers "why is this real server not getting traffic?" with the
// core's read (the one ipvsctl why and the API show).
func (p *Panel) whyShow(w http.ResponseWriter, r *http.Request, u who) {
	why, err := p.core.Why(r.Context(), r.PathValue("id"), r.PathValue("sid"))
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	pg := p.newPage(r.Context(), r, u, "Why is "+why.Server+" not getting traffic?", "live")
	pg.Data = whyPage(why)
	p.render(w, r, http.StatusOK, "why", pg)
}

func whyPage(why *server.Why) *whyData {
	d := &whyData{SvcID: why.Service, ID: why.Server, Addr: why.Address, Verdict: why.Verdict, Blocked: why.Blocking}
	for _, c := range why.Checks {
		d.Checks = append(d.Checks, check{What: c.Check.Title(), Blocking: c.Status == server.WhyBlocking,
			Unknown: c.Status == server.WhyUnknown, Reason: c.Reason, Detail: c.Detail})
	}
	return d
}
