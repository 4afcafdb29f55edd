package server

import (
	"sync"
	"time"
)

// userRate bounds how often each user may do one thing: at most n within
// window (a sliding window), so that one account cannot make the daemon
// run a check, or write the audit, as fast as it can send.
type userRate struct {
	mu     sync.Mutex
	n      int
	window time.Duration
	at     map[string][]time.Time
}

// maxRateUsers bounds the users a userRate remembers.
const maxRateUsers = 10_000

func newUserRate(n int, window time.Duration) *userRate {
	return &userRate{n: n, window: window, at: map[string][]time.Time{}}
}

// take counts one for user at now, or says how long it must wait.
func (u *userRate) take(user string, now time.Time) (wait time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	ts := u.at[user][:0:0]
	for _, t := range u.at[user] {
		if now.Sub(t) < u.window {
			ts = append(ts, t)
		}
	}
	if len(ts) >= u.n {
		u.at[user] = ts
		return ts[0].Add(u.window).Sub(now)
	}
	if _, ok := u.at[user]; !ok && len(u.at) >= maxRateUsers {
		clear(u.at)
	}
	u.at[user] = append(ts, now)
	return 0
}

// Check runs on demand ("test this check now") per user.
const (
	CheckRunsPerUser = 10
	CheckRunsWindow  = time.Minute
)
