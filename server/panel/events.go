package panel

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
)

// eventsShown is how many events the event log shows (newest first).
const eventsShown = 200

// eventsRecent is how many the overview's card shows.
const eventsRecent = 6

type eventsData struct {
	Type, Subject string
	Types         []string
	Rows          []eventRow
}

type eventRow struct {
	ID            int64
	At, Ago       string
	Type, Subject string
	Message       string
	Class         string // the row's colour: bad, warn, or none
}

// eventRowsOf turns events (oldest first) into rows, newest first.
func eventRowsOf(evs []server.Event, now time.Time) []eventRow {
	rows := make([]eventRow, 0, len(evs))
	for _, e := range slices.Backward(evs) {
		rows = append(rows, eventRow{ID: e.ID, At: when(e.Time), Ago: agoAt(e.Time, now), Type: e.Type, Subject: e.Subject,
			Message: e.Message, Class: eventClass(e)})
	}
	return rows
}

// eventClass is how alarming an event is, for its row's colour.
func eventClass(e server.Event) string {
	switch e.Type {
	case "realserver.down", "service.quorum_lost", "service.sorry_in", "reconcile.failed", "replication.failed", "login.locked_out", "bgp.withdrawn":
		return "bad"
	case "realserver.quiesced", "drift.repaired", "checker.late":
		return "warn"
	case "bgp.session", "vrrp.state":
		if st := e.Fields["state"]; st == "down" || st == "fault" || st == "stop" {
			return "bad"
		}
	}
	return ""
}

// latestEvents returns the newest n events that f selects, oldest first.
// Unfiltered, only the newest n are read (the overview's, at each of its
// renderings), not the whole ring.
func (p *Panel) latestEvents(r *http.Request, u who, f server.EventFilter, n int) ([]server.Event, error) {
	var after int64
	if len(f.Types) == 0 && f.Subject == "" {
		after = max(0, p.core.Events().Last()-int64(n))
	}
	evs, err := p.core.ReadEvents(r.Context(), p.actor(r, u), after, f)
	if len(evs) > n {
		evs = evs[len(evs)-n:]
	}
	return evs, err
}

func (p *Panel) eventsData(r *http.Request, u who) (*eventsData, error) {
	q := r.URL.Query()
	d := &eventsData{Type: strings.TrimSpace(q.Get("type")), Subject: strings.TrimSpace(q.Get("subject")), Types: server.EventTypes()}
	f, err := server.ParseEventFilter([]string{d.Type}, d.Subject)
	if err != nil {
		return nil, err
	}
	evs, err := p.latestEvents(r, u, f, eventsShown)
	if err != nil {
		return nil, err
	}
	d.Rows = eventRowsOf(evs, time.Now())
	return d, nil
}

// eventsShow is the event log: the newest events, refreshed every 2 s.
func (p *Panel) eventsShow(w http.ResponseWriter, r *http.Request, u who) {
	d, err := p.eventsData(r, u)
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	pg := p.newPage(r.Context(), r, u, "Events", "events")
	q := url.Values{}
	if d.Type != "" {
		q.Set("type", d.Type)
	}
	if d.Subject != "" {
		q.Set("subject", d.Subject)
	}
	pg.Refresh = "/events/rows"
	if len(q) > 0 {
		pg.Refresh += "?" + q.Encode()
	}
	pg.Data = d
	p.render(w, r, http.StatusOK, "events", pg)
}

// eventsRows is the log's table body alone, which the page fetches every 2 s.
func (p *Panel) eventsRows(w http.ResponseWriter, r *http.Request, u who) {
	d, err := p.eventsData(r, u)
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	p.renderTemplate(w, r, http.StatusOK, "events_rows", "event_rows", d)
}
