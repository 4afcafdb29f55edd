package httpd

import (
	"cmp"
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

// pollLimit counts the long polls (or the event streams) in progress per
// user, up to max (0: MaxLongPollsPerUser).
type pollLimit struct {
	max int
	mu  sync.Mutex
	n   map[string]int
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
	if l.n[who] >= cmp.Or(l.max, MaxLongPollsPerUser) {
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

// tooManyPolls answers a long poll (what) past the limit (max): 429, try
// again in 5 s.
func tooManyPolls(w http.ResponseWriter, what string, max int) {
	w.Header().Set("Retry-After", strconv.Itoa(5))
	writeJSON(w, http.StatusTooManyRequests, &ErrorBody{Error: "too many " + what + " at once for this user (at most " +
		strconv.Itoa(max) + "); try again later", Code: server.CodeBusy, Fields: []FieldError{}})
}
