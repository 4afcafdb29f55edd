package httpd

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
)

// MaxEventStreamsPerUser bounds the event streams one user or token holds
// open at once (a panel tab, a script, a chat bot each take one).
const MaxEventStreamsPerUser = 8

// eventsHeartbeat is how often a quiet stream sends a comment, so that
// proxies keep it and a reader notices a dead director.
const eventsHeartbeat = 15 * time.Second

// eventsWriteTimeout bounds one write to a stream: a reader that stops
// reading is cut off (the publisher never waits for it in any case).
const eventsWriteTimeout = 10 * time.Second

// EventList is the answer of GET /api/v1/events without a stream.
type EventList struct {
	Events []server.Event `json:"events"`
	// Last is the ID of the newest event returned, or the after asked
	// for: the after of the next read.
	Last int64 `json:"last"`
}

// events answers GET /api/v1/events: the events after ?after= (or
// Last-Event-ID) that ?type= and ?subject= select, as JSON, or, to a
// reader that accepts text/event-stream, those and then every new one as
// Server-Sent Events until it goes away.
func (a *api) events(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f, err := server.ParseEventFilter(q["type"], q.Get("subject"))
	if err != nil {
		return err
	}
	after, err := eventsAfter(r)
	if err != nil {
		return err
	}
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		evs, err := a.core.ReadEvents(r.Context(), actor(r), after, f)
		if err != nil {
			return err
		}
		if evs == nil {
			evs = []server.Event{}
		}
		last := after
		if len(evs) > 0 {
			last = evs[len(evs)-1].ID
		}
		writeJSON(w, http.StatusOK, &EventList{Events: evs, Last: last})
		return nil
	}
	release, ok := a.streams.take(r)
	if !ok {
		tooManyPolls(w, "event streams", MaxEventStreamsPerUser)
		return nil
	}
	defer release()
	past, fl, err := a.core.FollowEvents(r.Context(), actor(r), after, f)
	if err != nil {
		return err
	}
	defer a.core.Events().Unfollow(fl)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no") // nginx: pass each event on at once
	w.WriteHeader(http.StatusOK)
	send := func(write func() error) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(eventsWriteTimeout))
		return write() == nil && rc.Flush() == nil
	}
	// retry: the reader's EventSource waits 2 s before it reconnects.
	if !send(func() error { _, err := fmt.Fprint(w, "retry: 2000\n\n"); return err }) {
		return nil
	}
	for _, e := range past {
		if !send(func() error { return writeEvent(w, e) }) {
			return nil
		}
	}
	beat := time.NewTicker(eventsHeartbeat)
	defer beat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case e, ok := <-fl.C():
			if !ok {
				if fl.Dropped() {
					// Behind by more than the follower's buffer: it reconnects
					// with its Last-Event-ID and catches up from the store.
					send(func() error { _, err := fmt.Fprint(w, "event: dropped\ndata: {}\n\n"); return err })
				}
				return nil
			}
			if !send(func() error { return writeEvent(w, e) }) {
				return nil
			}
		case <-beat.C:
			if !send(func() error { _, err := fmt.Fprint(w, ": still here\n\n"); return err }) {
				return nil
			}
		}
	}
}

// writeEvent writes one event in the text/event-stream form: its ID (the
// reader's Last-Event-ID), its type and the event as JSON on one line.
func writeEvent(w http.ResponseWriter, e server.Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.ID, e.Type, b)
	return err
}

// eventsAfter is the ID a read starts after: ?after=, else the
// Last-Event-ID an EventSource sends when it reconnects, else 0.
func eventsAfter(r *http.Request) (int64, error) {
	name, v := "after", r.URL.Query().Get("after")
	if v == "" {
		name, v = "Last-Event-ID", r.Header.Get("Last-Event-ID")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, &server.Error{Code: server.CodeBadInput, Msg: name + ": " + strconv.Quote(v) + " is not an event ID (0 or more)"}
	}
	return n, nil
}
