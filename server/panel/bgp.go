package panel

import (
	"fmt"
	"net/http"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
)

// bgpData is the BGP page: the speaker's sessions, each VIP's route, node
// drain's progress and the Maglev fingerprints compared with the other
// directors (GET /api/v1/bgp's data).
type bgpData struct {
	S        *server.BGPStatus // nil outside BGP mode or without a daemon
	Drained  bool              // node drain is on (the node setting)
	CanDrain bool
	Peers    []bgpPeerRow
	VIPs     []bgpVIPRow
	Drain    *bgpDrainRow
	Compared int // the other directors that answered, not stale
	Asked    int
	Stale    int
	// Directors are the other directors of the group this one knows.
	Directors []bgpDirectorRow
}

// bgpDirectorRow is another director: how it was heard, whether its
// Maglev inputs were compared, and the services that differ.
type bgpDirectorRow struct {
	bgp.DirectorFingerprints
	Class, Word, Heard string
	Differ             []string
}

type bgpPeerRow struct {
	bgp.PeerStatus
	Class, Uptime, BFDClass string
}

type bgpVIPRow struct {
	bgp.Decision
	Class, Word string
}

type bgpDrainRow struct {
	bgp.DrainStatus
	Class, How string
	Percent    int // of the quiet window
}

func (p *Panel) bgpDataOf(r *http.Request, u who) (*bgpData, error) {
	n, err := p.core.NodeSettings(r.Context())
	if err != nil {
		return nil, err
	}
	d := &bgpData{S: n.BGP, Drained: n.Drained, CanDrain: auth.Allows(u.role, server.RoleFor("node set"))}
	if d.S == nil {
		return d, nil
	}
	now := time.Now()
	for _, ps := range d.S.Peers {
		row := bgpPeerRow{PeerStatus: ps, Class: "st-down", BFDClass: "st-down"}
		if ps.Up {
			row.Class = "st-up"
			if !ps.Since.IsZero() {
				row.Uptime = ageText(now.Sub(ps.Since))
			}
		}
		if ps.BFD == "up" {
			row.BFDClass = "st-up"
		}
		d.Peers = append(d.Peers, row)
	}
	for _, v := range d.S.VIPs {
		row := bgpVIPRow{Decision: v, Class: "st-down", Word: "withdrawn"}
		switch {
		case v.Announce && v.Prepend > 0:
			row.Class, row.Word = "st-drift", "de-preferred"
		case v.Announce:
			row.Class, row.Word = "st-up", "announced"
		}
		d.VIPs = append(d.VIPs, row)
	}
	if ds := d.S.Drain; ds != nil {
		row := &bgpDrainRow{DrainStatus: *ds, Class: "st-drift", How: "routes withdrawn"}
		if ds.Mode == "prepend" {
			row.How = fmt.Sprintf("AS path prepended %d times", ds.Prepend)
		}
		switch ds.Phase {
		case bgp.DrainDrained:
			row.Class, row.Percent = "st-up", 100
		case bgp.DrainTimedOut:
			row.Class = "st-down"
		}
		if row.Percent == 0 && ds.QuietWindow > 0 {
			row.Percent = min(int(100*ds.Quiet/ds.QuietWindow), 99)
		}
		d.Drain = row
	}
	for _, o := range d.S.Directors {
		d.Asked++
		row := bgpDirectorRow{DirectorFingerprints: o, Class: "st-up", Word: "match", Heard: "never"}
		if !o.ReportedAt.IsZero() {
			row.Heard = ageText(time.Duration(o.AgeSeconds*float64(time.Second))) + " ago"
		}
		for _, m := range d.S.Mismatches {
			if m.Director == o.Director {
				row.Differ = append(row.Differ, m.Service)
			}
		}
		switch {
		case o.Error != "":
			row.Class, row.Word = "st-down", "not compared"
		case o.Stale:
			row.Class, row.Word = "st-drift", "stale"
			d.Stale++
		case len(row.Differ) > 0:
			row.Class, row.Word = "st-down", "mismatch"
			d.Compared++
		default:
			d.Compared++
		}
		d.Directors = append(d.Directors, row)
	}
	return d, nil
}

// bgpShow is the BGP page; its body polls /bgp/body every 2 s, so that a
// drain's progress moves on the screen.
func (p *Panel) bgpShow(w http.ResponseWriter, r *http.Request, u who) {
	d, err := p.bgpDataOf(r, u)
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	pg := p.newPage(r.Context(), r, u, "BGP", "bgp")
	pg.Flash = takeFlash(w, r)
	pg.Data = d
	p.render(w, r, http.StatusOK, "bgp", pg)
}

func (p *Panel) bgpBody(w http.ResponseWriter, r *http.Request, u who) {
	d, err := p.bgpDataOf(r, u)
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	p.renderTemplate(w, r, http.StatusOK, "bgp", "bgp_body", d)
}

// bgpDrain is node drain or undrain from the BGP page (the core's SetNode,
// as ipvsctl node drain without waiting: the page shows the progress).
func (p *Panel) bgpDrain(on bool) func(http.ResponseWriter, *http.Request, who) {
	return func(w http.ResponseWriter, r *http.Request, u who) {
		if _, err := p.core.SetNode(r.Context(), p.actor(r, u), server.NodePatch{Drained: &on}); err != nil {
			p.fail(w, r, u, err)
			return
		}
		msg := "node undrained: the VIPs are announced with the plain AS path again"
		if on {
			msg = "node drain started: the progress is below"
		}
		redirect(w, r, "/bgp", msg)
	}
}

// bgpCard is the overview's BGP tile (nil outside BGP mode).
type bgpCard struct {
	Up, Peers, Announced, VIPs int
	Drain                      string // the drain's phase, "" when not drained
	Mismatch                   int    // services whose Maglev inputs differ from another director's
	Compared, Stale            int
	Error                      string
}

func bgpCardOf(s *server.BGPStatus) *bgpCard {
	if s == nil {
		return nil
	}
	c := &bgpCard{Peers: len(s.Peers), Announced: s.Announced, VIPs: len(s.VIPs), Mismatch: len(s.Mismatches), Error: s.Error}
	for _, ps := range s.Peers {
		if ps.Up {
			c.Up++
		}
	}
	if s.Drain != nil {
		c.Drain = s.Drain.Phase
	}
	for _, o := range s.Directors {
		switch {
		case o.Stale && o.Error == "":
			c.Stale++
		case o.Error == "":
			c.Compared++
		}
	}
	return c
}
