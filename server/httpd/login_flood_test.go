package httpd_test

import (
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// floodLogin posts the panel's login form as user from the client address
// from (X-Forwarded-For, the rig's loopback peer a trusted proxy).
func floodLogin(t *testing.T, g *servertest.Rig, user, from string) (*http.Response, time.Duration) {
	t.Helper()
	form := url.Values{"user": {user}, "password": {g.Password}}
	req, _ := http.NewRequest("POST", g.URL+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "text/html")
	req.Header.Set("X-Forwarded-For", from)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	start := time.Now()
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Error(err)
		return &http.Response{}, 0
	}
	resp.Body.Close()
	return resp, time.Since(start)
}

// An admin's login is not queued behind another account's flood: 100
// clients logging in as the viewer, each from its own address and each
// retrying at once on 429, hold at most one of the two hashing slots and
// keep at most one of the viewer's checks waiting, so the admin's check
// takes the other slot at once, behind none (HashStats, WaitedBehind:
// counters, not the clock). The admin's login time, idle and under the
// flood, and their ratio are logged.
func TestAdminLoginIsNotQueuedBehindAnotherAccount(t *testing.T) {
	g := servertest.Start(t, servertest.WithAuth(auth.Config{
		Params:         auth.Params{Memory: 16 << 10, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}, // 16 MiB: a hash takes a while
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
	}))
	var idle []time.Duration
	for range 3 {
		resp, d := floodLogin(t, g, "admin", "198.18.9.9")
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("the admin's idle login: %d", resp.StatusCode)
		}
		idle = append(idle, d)
	}
	var stop atomic.Bool
	var ok, limited, other atomic.Int64
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from := netip.AddrFrom4([4]byte{198, 18, 5, byte(i)}).String()
			for n := 0; n < 500 && !stop.Load(); n++ {
				resp, _ := floodLogin(t, g, "viewer", from)
				switch {
				case resp.StatusCode == http.StatusSeeOther:
					ok.Add(1)
				case resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "":
					limited.Add(1)
				default:
					if other.Add(1) <= 3 {
						t.Logf("a viewer login answered %d", resp.StatusCode)
					}
				}
			}
		}()
	}
	// The viewer's flood holds its one slot and has a check waiting.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if s := g.Auth.HashStats(); s.Running >= 1 && s.Queued >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the flood never took its slot: %+v", g.Auth.HashStats())
		}
	}
	var loaded []time.Duration
	for range 3 {
		resp, d := floodLogin(t, g, "admin", "198.18.9.9")
		if resp.StatusCode != http.StatusSeeOther {
			t.Errorf("the admin's login under the flood: %d", resp.StatusCode)
		}
		loaded = append(loaded, d)
	}
	stop.Store(true)
	wg.Wait()
	s := g.Auth.HashStats()
	behind := g.Auth.WaitedBehind("admin")
	median := func(ds []time.Duration) time.Duration { ds = slices.Clone(ds); slices.Sort(ds); return ds[len(ds)/2] }
	t.Logf("admin login: idle %s (median of %v), under 100 parallel viewer logins %s (median of %v), %.1fx; it waited behind at most %d checks; "+
		"viewer: %d logged in, %d answered 429; slots %+v", median(idle), idle, median(loaded), loaded,
		float64(median(loaded))/float64(median(idle)), behind, ok.Load(), limited.Load(), s)
	if behind != 0 {
		t.Errorf("the admin's check waited behind %d others, want none (the viewer holds one slot at most)", behind)
	}
	if s.Peak > s.Slots || s.QueuePeak > 1 {
		t.Errorf("slots %+v: want at most %d running and 1 waiting (the viewer's one)", s, s.Slots)
	}
	if ok.Load() > 20 { // auth.Config.LoginSuccesses' default
		t.Errorf("the viewer logged in %d times, past its bound of 20 successful logins within the window", ok.Load())
	}
	if other.Load() != 0 || limited.Load() == 0 || ok.Load() == 0 {
		t.Errorf("viewer's answers: %d logged in, %d limited (429 with Retry-After), %d other", ok.Load(), limited.Load(), other.Load())
	}
	if s.Refused == 0 || s.Refused > limited.Load() {
		t.Errorf("%d refused by the queue, of the %d answered 429", s.Refused, limited.Load())
	}
}
