package auth

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/server/store"
)

// Password checks wait for the two hashing slots in one queue, bounded so
// that no caller makes another's login wait behind its own: one user (and
// one address) holds at most one of the two slots, so the other stays free
// for everyone else; a user's second waiting check and an address's second
// are answered 429 with Retry-After at once, and so is any past
// MaxQueuedChecks. Checked with the slots held (each check blocked in its
// hash until released), so that what runs, waits and is refused is exact,
// on the counters the slots keep.
func TestPasswordChecksQueueIsBoundedPerUserAndAddress(t *testing.T) {
	f := newFixture(t, Config{MaxQueuedChecks: 3})
	for _, u := range []struct {
		name string
		role Role
	}{{"vera", Viewer}, {"otto", Operator}, {"ada", Admin}, {"cy", Viewer}} {
		f.addUser(t, u.name, u.role)
	}
	h := f.handler(t)
	gate := make(chan struct{})
	entered := make(chan struct{}, 16)
	f.a.verify = func(encoded, password string) (bool, error) {
		entered <- struct{}{}
		<-gate
		return VerifyPassword(encoded, password)
	}
	type answer struct {
		code  int
		retry string
		body  string
	}
	login := func(name, from string) answer {
		w := do(h, req{method: "POST", path: "/api/v1/login", body: loginBody(name, pw+" "+name), remote: from + ":40000"})
		return answer{w.Code, w.Header().Get("Retry-After"), w.Body.String()}
	}
	var wg sync.WaitGroup
	waiting := map[string]chan answer{}
	start := func(key, name, from string) {
		ch := make(chan answer, 1)
		waiting[key] = ch
		wg.Add(1)
		go func() { defer wg.Done(); ch <- login(name, from) }()
	}
	until := func(what string, cond func(HashStats) bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(f.a.HashStats()); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: %+v", what, f.a.HashStats())
			}
		}
	}
	// vera holds one slot; her second check waits though the other is free.
	start("vera1", "vera", "198.18.5.1")
	<-entered
	start("vera2", "vera", "198.18.5.2")
	until("vera's second check to wait beside the free slot", func(s HashStats) bool { return s.Queued == 1 && s.Running == 1 })
	// otto takes the free slot at once.
	start("otto", "otto", "198.18.5.3")
	<-entered
	if s := f.a.HashStats(); s.Running != 2 || s.Queued != 1 {
		t.Fatalf("otto's check did not take the free slot: %+v", s)
	}
	refused := func(a answer, want string) {
		t.Helper()
		if a.code != http.StatusTooManyRequests || a.retry == "" || !strings.Contains(a.body, want) {
			t.Errorf("got %d Retry-After %q %s; want 429 with Retry-After, saying %q", a.code, a.retry, a.body, want)
		}
	}
	refused(login("vera", "198.18.5.4"), `a password check of user \"vera\" is already waiting`)
	refused(login("otto", "198.18.5.2"), "a password check from 198.18.5.2 is already waiting")
	start("ada", "ada", "198.18.5.6")
	until("ada's check to wait", func(s HashStats) bool { return s.Queued == 2 })
	start("cy", "cy", "198.18.5.7")
	until("three checks to wait", func(s HashStats) bool { return s.Queued == 3 })
	refused(login("nobody", "198.18.5.8"), "3 password checks are already waiting")
	close(gate)
	wg.Wait()
	for key, ch := range waiting {
		if a := <-ch; a.code != 200 {
			t.Errorf("%s: %d %s", key, a.code, a.body)
		}
	}
	s := f.a.HashStats()
	if s.Peak != 2 || s.QueuePeak != 3 || s.Refused != 3 || s.Queued != 0 || s.Running != 0 {
		t.Errorf("slots: %+v, want peak 2, queue peak 3, 3 refused, none left", s)
	}
	// Each waited behind those running and queued as it came; otto behind none.
	for user, want := range map[string]int{"vera": 1, "otto": 0, "ada": 3, "cy": 4} {
		if got := f.a.WaitedBehind(user); got != want {
			t.Errorf("%s waited behind %d checks, want %d", user, got, want)
		}
	}
	// The refusals are written together refusalFlush after the first.
	var es []store.AuditEntry
	var err error
	for deadline := time.Now().Add(10 * refusalFlush); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if es, err = f.st.Audit(context.Background(), store.AuditFilter{Contains: "already waiting"}); err != nil || len(es) >= 3 {
			break
		}
	}
	if err != nil || len(es) != 3 {
		t.Errorf("audit of the refused checks: %d rows, %v: %+v", len(es), err, es)
	}
}

// A user's successful logins are limited too (LoginSuccesses within
// LoginWindow): past it, 429 with Retry-After and no password checked.
func TestSuccessfulLoginsAreLimited(t *testing.T) {
	f := newFixture(t, Config{LoginSuccesses: 3})
	f.addUser(t, "vera", Viewer)
	f.addUser(t, "ada", Admin)
	h := f.handler(t)
	for range 3 {
		f.login(t, h, "vera", "")
	}
	hashed := f.a.HashStats().Hashes
	w := do(h, req{method: "POST", path: "/api/v1/login", body: loginBody("vera", pw+" vera")})
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "3 successful logins of this user within 5m0s") {
		t.Fatalf("vera's 4th login: %d Retry-After %q %s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	if n := f.a.HashStats().Hashes - hashed; n != 0 {
		t.Errorf("%d hashes for a login past the limit, want none", n)
	}
	f.login(t, h, "ada", "") // another user's are not
	f.clock.Add(5 * time.Minute)
	f.login(t, h, "vera", "")
}

// Attempts checked side by side count against the successful logins'
// bound while they are checked: with one login short of the bound and one
// being checked, another is refused without a hash rather than let
// through to make one more than the bound.
func TestSuccessfulLoginsBoundHoldsSideBySide(t *testing.T) {
	f := newFixture(t, Config{LoginSuccesses: 3})
	f.addUser(t, "vera", Viewer)
	h := f.handler(t)
	for range 2 {
		f.login(t, h, "vera", "")
	}
	gate := make(chan struct{})
	entered := make(chan struct{}, 2)
	f.a.verify = func(encoded, password string) (bool, error) {
		entered <- struct{}{}
		<-gate
		return VerifyPassword(encoded, password)
	}
	login := func(from string) <-chan int {
		c := make(chan int, 1)
		go func() {
			c <- do(h, req{method: "POST", path: "/api/v1/login", body: loginBody("vera", pw+" vera"), remote: from}).Code
		}()
		return c
	}
	first := login("198.18.0.1:1")
	<-entered
	second := login("198.18.0.2:1")
	select {
	case code := <-second:
		if code != http.StatusTooManyRequests {
			t.Errorf("the login beside the one being checked: %d, want 429", code)
		}
	case <-entered:
		t.Error("a login beside the one being checked, with one short of the bound, had its password checked")
		close(gate)
		<-second
		<-first
		return
	}
	close(gate)
	if code := <-first; code != http.StatusOK {
		t.Errorf("the login checked first: %d", code)
	}
	if w := do(h, req{method: "POST", path: "/api/v1/login", body: loginBody("vera", pw+" vera")}); w.Code != http.StatusTooManyRequests {
		t.Errorf("a login past the bound: %d", w.Code)
	}
}
