package httpd_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/httpd"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// A user holds at most MaxLongPollsPerUser long polls at once; past it,
// 429 with Retry-After; another user is not held up by it.
func TestLongPollsCappedPerUser(t *testing.T) {
	g := servertest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	poll := func(token string) chan int {
		got := make(chan int, 1)
		req, _ := http.NewRequestWithContext(ctx, "GET", g.URL+"/api/v1/state?after=1000", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				got <- 0
				return
			}
			resp.Body.Close()
			if resp.StatusCode == 429 && resp.Header.Get("Retry-After") == "" {
				got <- -1
				return
			}
			got <- resp.StatusCode
		}()
		return got
	}
	var held []chan int
	for range httpd.MaxLongPollsPerUser {
		held = append(held, poll(g.Tokens[auth.Viewer]))
	}
	time.Sleep(300 * time.Millisecond) // the four are waiting
	for i, h := range held {
		select {
		case code := <-h:
			t.Fatalf("long poll %d answered %d at once", i, code)
		default:
		}
	}
	select {
	case code := <-poll(g.Tokens[auth.Viewer]):
		if code != http.StatusTooManyRequests {
			t.Fatalf("fifth long poll: %d, want 429 with Retry-After", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the fifth long poll of one user waited")
	}
	other := poll(g.Tokens[auth.Operator])
	time.Sleep(200 * time.Millisecond)
	select {
	case code := <-other:
		t.Fatalf("another user's long poll answered %d at once", code)
	default:
	}
}
