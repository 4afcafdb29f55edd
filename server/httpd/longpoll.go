package httpd

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
)

// MaxLongPollsPerUser bounds the long polls (GET /api/v1/state?after=N)
// one user or token holds at once: each looks at the database every 50 ms
// while it waits, so a viewer must not open thousands.
const MaxLongPollsPerUser = 4

// pollLimit counts the long polls in progress per user.
type pollLimit struct {
	mu sync.Mutex
	n  map[string]int
}

// take reserves a long poll for r's caller; ok false past the limit.
func (l *pollLimit) take(r *http.Request) (release func(), ok bool) {
	who := "(anonymous)"
	if p, found := auth.FromContext(r.Context()); found {
		who = p.User
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == nil {
		l.n = map[string]int{}
	}
	if l.n[who] >= MaxLongPollsPerUser {
		return nil, false
	}
	l.n[who]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.n[who]--; l.n[who] <= 0 {
			delete(l.n, who)
		}
	}, true
}

// tooManyPolls answers a long poll past the limit: 429, try again in 5 s.
func tooManyPolls(w http.ResponseWriter) {
	w.Header().Set("Retry-After", strconv.Itoa(5))
	writeJSON(w, http.StatusTooManyRequests, &ErrorBody{Error: "too many long polls at once for this user (at most " +
		strconv.Itoa(MaxLongPollsPerUser) + "); try again later", Code: server.CodeBusy, Fields: []FieldError{}})
}
