package panel

import (
	"context"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/events"
)

// withEvents gives the env's core a daemon's event log over its store.
func withEvents(t *testing.T, l **events.Log) func(*server.Config) {
	return func(cfg *server.Config) {
		ev, err := events.New(context.Background(), cfg.Store, nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Events, *l = ev, ev
	}
}

// The event log shows the newest events first, a down server's row marked,
// refreshes its rows from /events/rows, filters by type and subject, and
// refuses a type that is none, naming it; the overview's card shows the
// newest.
func TestEventLogAndOverviewCard(t *testing.T) {
	var l *events.Log
	e := newEnvOf(t, envOptions{core: []func(*server.Config){withEvents(t, &l)}})
	e.seed(t, webState()) // a revision stored: an event
	l.Publish(events.Event{Type: events.ServerDown, Subject: "-t 198.18.0.100:80 -r 198.18.0.12:80",
		Message: "real server r2 (198.18.0.12:80) of web down, out of the service: HTTP 503"})

	r := e.get(t, "vic", "/events")
	if r.Code != 200 {
		t.Fatalf("GET /events as a viewer: %d %s", r.Code, excerpt(r.Body))
	}
	down := strings.Index(r.Body, "of web down, out of the service: HTTP 503")
	stored := strings.Index(r.Body, "stored by seed (test)")
	if down < 0 || stored < 0 || down > stored {
		t.Errorf("the log does not show the down server above the revision (at %d, %d): %s", down, stored, excerpt(r.Body))
	}
	if !strings.Contains(r.Body, `<tr class="ev-bad">`) || !strings.Contains(r.Body, `data-poll="/events/rows"`) {
		t.Errorf("the down server's row is not marked, or the rows do not refresh: %s", excerpt(r.Body))
	}

	rows := e.get(t, "vic", "/events/rows?type=realserver.&subject=198.18.0.12")
	if rows.Code != 200 || !strings.Contains(rows.Body, "HTTP 503") || strings.Contains(rows.Body, "stored by seed") || strings.Contains(rows.Body, "<html") {
		t.Errorf("filtered rows: %d %s", rows.Code, excerpt(rows.Body))
	}
	if none := e.get(t, "vic", "/events/rows?subject=198.18.9.9"); !strings.Contains(none.Body, "No event yet that matches.") {
		t.Errorf("rows matching nothing: %s", excerpt(none.Body))
	}
	bad := e.get(t, "vic", "/events?type=realserver.gone")
	if bad.Code != 422 || !strings.Contains(bad.Body, "realserver.gone") || !strings.Contains(bad.Body, "is not an event type") {
		t.Errorf("an unknown type: %d %s", bad.Code, excerpt(bad.Body))
	}

	ov := e.get(t, "vic", "/")
	card := ov.Body[max(0, strings.Index(ov.Body, `id="recent-events"`)):]
	if !strings.Contains(card, "HTTP 503") || !strings.Contains(card, `href="/events"`) {
		t.Errorf("the overview's recent events: %s", excerpt(card))
	}
	// A new event is on the overview at once: its rendering's key has it.
	l.Publish(events.Event{Type: events.ServerBack, Subject: "-t 198.18.0.100:80 -r 198.18.0.12:80", Message: "real server r2 back up"})
	if ov := e.get(t, "vic", "/"); !strings.Contains(ov.Body, "real server r2 back up") {
		t.Errorf("the overview does not show the newest event: %s", excerpt(ov.Body))
	}
}
