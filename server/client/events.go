package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/httpd"
)

func eventQuery(after int64, f server.EventFilter) url.Values {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	if len(f.Types) > 0 {
		q.Set("type", strings.Join(f.Types, ","))
	}
	if f.Subject != "" {
		q.Set("subject", f.Subject)
	}
	return q
}

// ReadEvents is GET /api/v1/events.
func (c *Client) ReadEvents(ctx context.Context, _ server.Actor, after int64, f server.EventFilter) ([]server.Event, error) {
	var out httpd.EventList
	_, err := c.do(ctx, "GET", "/api/v1/events", eventQuery(after, f), nil, nil, &out)
	return out.Events, err
}

// WatchEvents follows GET /api/v1/events as Server-Sent Events. A stream
// that ends (the reader was dropped for falling behind, a proxy cut it) is
// opened again after the last event seen, a second later; one that cannot
// be opened is the error.
func (c *Client) WatchEvents(ctx context.Context, _ server.Actor, after int64, f server.EventFilter, fn func(server.Event) error) error {
	for {
		err := c.stream(ctx, after, f, func(e server.Event) error {
			if err := fn(e); err != nil {
				return err
			}
			after = e.ID
			return nil
		})
		if err != nil || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// stream reads one event stream to its end (nil) or fn's error.
func (c *Client) stream(ctx context.Context, after int64, f server.EventFilter, fn func(server.Event) error) error {
	u := c.base + "/api/v1/events"
	if q := eventQuery(0, f); len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.author != "" {
		req.Header.Set("X-Ipvsctl-Author", c.author)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("ipvsctl daemon at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return decodeError(resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), httpd.MaxBody)
	var data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "" && data != "":
			var e server.Event
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				return fmt.Errorf("read the daemon's event stream: %w", err)
			}
			data = ""
			if e.ID == 0 {
				continue // event: dropped, whose data is {}
			}
			if err := fn(e); err != nil {
				return err
			}
		}
	}
	return nil
}
