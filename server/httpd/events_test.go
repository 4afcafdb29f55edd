package httpd_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/ipvsmgrtest"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/client"
	"github.com/ipvsctl/ipvsctl/server/events"
	"github.com/ipvsctl/ipvsctl/server/httpd"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// A viewer following GET /api/v1/events (Server-Sent Events) sees the
// revision an admin stores, and the real servers its checks find up and
// down, with the check's reason; a reader resuming with Last-Event-ID gets
// only what came after; the JSON answer filters by type and subject.
func TestEventStreamTellsOfRevisionsAndRealServers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g := servertest.Start(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ipvsmgrtest.AcceptAndClose(ln)
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()

	viewer, _ := client.New(g.URL, g.Tokens[auth.Viewer])
	got := make(chan server.Event, 64)
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan error, 1)
	go func() {
		watched <- viewer.WatchEvents(watchCtx, server.Actor{}, 0, server.EventFilter{}, func(e server.Event) error {
			got <- e
			return nil
		})
	}()
	// The stream is open once a first event comes through it: publish one
	// until it does (the watch starts after 0, so it also gets the earlier).
	g.Events.Publish(events.Event{Type: events.DriftRepaired, Subject: "kernel", Message: "a first event"})
	first := next(t, ctx, got)

	doc := fmt.Sprintf(`{"services":[{"name":"web","address":"198.18.0.100","port":80,"scheduler":"wrr",
 "check": {"type": "tcp", "address": "127.0.0.1", "interval": 0.1, "timeout": 0.5, "rise": 1, "fall": 1, "on_failure": "remove"},
 "servers":[{"name":"r1","address":"198.18.0.11","weight":3,"check":{"port":%d}},
            {"name":"r2","address":"198.18.0.12","weight":1,"check":{"port":%d}}]}]}`,
		ln.Addr().(*net.TCPAddr).Port, closedPort)
	if resp, body := do(t, g, g.Tokens[auth.Admin], "PUT", "/api/v1/state", doc); resp.StatusCode != 200 {
		t.Fatalf("PUT /state: %s %s", resp.Status, body)
	}
	seen := map[string]server.Event{}
	for len(seen) < 3 {
		e := next(t, ctx, got)
		switch {
		case e.Type == events.Revision:
			seen["revision"] = e
		case e.Type == events.ServerUp && strings.Contains(e.Subject, "198.18.0.11"):
			seen["r1 up"] = e
		case e.Type == events.ServerDown && strings.Contains(e.Subject, "198.18.0.12"):
			seen["r2 down"] = e
		}
	}
	if r := seen["revision"]; r.Fields["by"] != "admin" || r.Fields["via"] != "api" || !strings.Contains(r.Message, "stored by admin") {
		t.Errorf("revision event = %+v", r)
	}
	if d := seen["r2 down"]; d.Fields["reason"] != "connection refused" || d.Fields["server_name"] != "r2" || d.Fields["service_name"] != "web" ||
		!strings.Contains(d.Message, "r2 (198.18.0.12:80) of web") {
		t.Errorf("r2's down event = %+v", d)
	}
	stopWatch()
	if err := <-watched; err != nil {
		t.Errorf("WatchEvents ended with %v", err)
	}

	// Resumed: only what came after the first event, each once, in order.
	req, _ := http.NewRequestWithContext(ctx, "GET", g.URL+"/api/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+g.Tokens[auth.Viewer])
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", fmt.Sprint(first.ID))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	buf := make([]byte, 4096)
	n, _ := resp.Body.Read(buf)
	resp.Body.Close()
	if s := string(buf[:n]); !strings.HasPrefix(s, "retry: 2000\n\n") || strings.Contains(s, fmt.Sprintf("id: %d\n", first.ID)) {
		t.Errorf("resumed stream after %d starts %q", first.ID, s)
	}

	// The JSON answer: a type prefix and a subject.
	evs, err := viewer.ReadEvents(ctx, server.Actor{}, 0, server.EventFilter{Types: []string{"realserver."}, Subject: "198.18.0.12"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) == 0 {
		t.Fatal("no realserver. events of 198.18.0.12")
	}
	for _, e := range evs {
		if !strings.HasPrefix(e.Type, "realserver.") || !strings.Contains(e.Subject, "198.18.0.12") {
			t.Errorf("filtered answer has %s %s", e.Type, e.Subject)
		}
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].ID <= evs[i-1].ID {
			t.Errorf("events out of order: %d after %d", evs[i].ID, evs[i-1].ID)
		}
	}
}

// A filter that names no type, and an after that is no ID, are refused
// with the field and the value; a caller without a token gets 401.
func TestEventsRefuseBadFilters(t *testing.T) {
	g := servertest.Start(t)
	for path, want := range map[string]string{
		"/api/v1/events?type=realserver.gone": `type: \"realserver.gone\" is not an event type`,
		"/api/v1/events?after=-3":             `after: \"-3\" is not an event ID`,
	} {
		resp, body := do(t, g, g.Tokens[auth.Viewer], "GET", path, "")
		if resp.StatusCode != 422 || !strings.Contains(body, want) {
			t.Errorf("GET %s: %s %s, want 422 with %s", path, resp.Status, body, want)
		}
	}
	if resp, _ := do(t, g, "", "GET", "/api/v1/events", ""); resp.StatusCode != 401 {
		t.Errorf("GET /events without a token: %s", resp.Status)
	}
}

// At most MaxEventStreamsPerUser streams per user at once: the next is 429.
func TestEventStreamsPerUserAreBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g := servertest.Start(t)
	open := func() *http.Response {
		req, _ := http.NewRequestWithContext(ctx, "GET", g.URL+"/api/v1/events", nil)
		req.Header.Set("Authorization", "Bearer "+g.Tokens[auth.Viewer])
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var streams []*http.Response
	defer func() {
		for _, r := range streams {
			r.Body.Close()
		}
	}()
	for range httpd.MaxEventStreamsPerUser {
		r := open()
		if r.StatusCode != 200 {
			t.Fatalf("stream %d: %s", len(streams)+1, r.Status)
		}
		streams = append(streams, r)
	}
	r := open()
	defer r.Body.Close()
	if r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Errorf("stream %d: %s, want 429 with Retry-After", httpd.MaxEventStreamsPerUser+1, r.Status)
	}
}

func next(t *testing.T, ctx context.Context, c <-chan server.Event) server.Event {
	t.Helper()
	select {
	case e := <-c:
		return e
	case <-ctx.Done():
		t.Fatal("timed out waiting for an event")
		return server.Event{}
	}
}
