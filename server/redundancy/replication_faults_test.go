package redundancy_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/server/httpd"
	"github.com/ipvsctl/ipvsctl/server/metrics"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// flakyPeer is a replication peer (a real HTTP server on loopback) that
// serves a good document as revision 1, then misbehaves as mode says.
type flakyPeer struct {
	srv   *httptest.Server
	first string // revision 1's document

	mu      sync.Mutex
	good    string // the document served as good (revision 1, or 4 once changed)
	at      time.Time
	mode    string
	hits    int
	written atomic.Int64 // body bytes the huge answer got onto the socket before the reader stopped
}

func (p *flakyPeer) set(mode string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.hits = mode, 0
}

// serveGood makes doc, made now, the good revision.
func (p *flakyPeer) serveGood(doc string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.good, p.at = "good", doc, time.Now()
}

func (p *flakyPeer) requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits
}

func (p *flakyPeer) headers(w http.ResponseWriter, rev, doc string, at time.Time) {
	h := w.Header()
	h.Set("ETag", `"`+rev+`"`)
	h.Set(httpd.HeaderRevisionAt, at.UTC().Format(time.RFC3339Nano))
	h.Set(httpd.HeaderRevisionAuthor, "alice")
	h.Set(httpd.HeaderContentHash, store.DocumentHash([]byte(doc)))
	h.Set(httpd.HeaderNode, "198.18.0.2")
	h.Set("Content-Type", "application/json")
}

func (p *flakyPeer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.hits++
	mode, good, at := p.mode, p.good, p.at
	p.mu.Unlock()
	if r.URL.Path != "/api/v1/state" {
		http.NotFound(w, r)
		return
	}
	wait := func(d time.Duration) bool {
		select {
		case <-r.Context().Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	switch mode {
	case "good":
		// The long poll's wait, shortened (a real peer's is 25 s); a revision
		// newer than the follower's is answered at once.
		if r.URL.Query().Get("after") == "1" && good == p.first && !wait(1200*time.Millisecond) {
			return
		}
		rev := "1"
		if good != p.first {
			rev = "4"
		}
		p.headers(w, rev, good, at)
		w.Write([]byte(good))
	case "hangup": // the peer dies in the middle of the long poll: the connection closes with no answer
		if !wait(100 * time.Millisecond) {
			return
		}
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
	case "garbage": // a director's headers over a body that is no document
		body := "<html><body>502 Bad Gateway</body></html>"
		p.headers(w, "2", body, at)
		w.Write([]byte(body))
	case "foreign": // another program on the port: a page, no revision
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html><body>It works!</body></html>"))
	case "huge": // a body without end (bounded here: 64 MiB or 20 s)
		p.headers(w, "3", "", at)
		w.WriteHeader(http.StatusOK)
		chunk := []byte(`{"services":[` + strings.Repeat(" ", 64<<10-13))
		deadline := time.Now().Add(20 * time.Second)
		for range 1024 {
			if time.Now().After(deadline) {
				return
			}
			n, err := w.Write(chunk)
			p.written.Add(int64(n))
			if err != nil {
				return
			}
			chunk = []byte(strings.Repeat(" ", 64<<10))
		}
	}
}

// The replication peer disappears in the middle of a long poll, answers
// with garbage under a director's headers, answers as some other program
// would (no revision), and answers with a body without end. Each time the
// follower keeps the last good state (no revision stored, the kernel as it
// was), reads no more than a director's document may be, does not poll in a
// busy loop, and says why: the replication status's error, the log,
// ipvsctl_replication_connected 0 and ipvsctl_replication_failures_total.
// Once the peer behaves again its state is taken.
func TestReplicationPeerMisbehavesFollowerKeepsLastGood(t *testing.T) {
	good := canonical(t, plainState)
	p := &flakyPeer{first: good, good: good, at: time.Now(), mode: "good"}
	p.srv = httptest.NewServer(p)
	t.Cleanup(p.srv.Close)
	d := newDirector(t, "198.18.0.3", 100)
	follow(t, d, p.srv.URL, "")
	d.start(&hub{}, nil)
	eventually(t, 5*time.Second, "the peer's good document stored", func() bool { return d.head().Hash == store.DocumentHash([]byte(good)) })
	kept := d.head()
	table := func() string {
		tb, err := d.k.Table(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, s := range tb.Services {
			fmt.Fprintf(&b, "%+v;", s.Key)
			for _, dst := range s.Dests {
				fmt.Fprintf(&b, " %+v w%d;", dst.Key, dst.Weight)
			}
		}
		return b.String()
	}
	eventually(t, 5*time.Second, "the good document in the kernel", func() bool { return strings.Contains(table(), "198.18.0.11") })
	keptTable := table()

	scrape := func() string {
		rec := httptest.NewRecorder()
		metrics.New(d.core).Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	failures := func() int64 {
		if r := d.status(); r != nil && r.Replication != nil {
			return r.Replication.Failures
		}
		return -1
	}
	var mu sync.Mutex
	var reasons []string
	for _, tc := range []struct{ mode, want string }{
		{"hangup", "EOF"},
		{"garbage", "store replication"},
		{"foreign", `is not an ipvsctl director's state: ETag "" is not a revision (text/html`},
		{"huge", "larger than 16 MiB, the most a director's document may be: not read past that"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			before := failures()
			p.set(tc.mode)
			start := time.Now()
			eventually(t, 10*time.Second, "the reason in the replication status", func() bool {
				return strings.Contains(replicationError(d), tc.want)
			})
			time.Sleep(2 * time.Second) // the follower goes on asking
			elapsed := time.Since(start)
			n := p.requests()
			t.Logf("%s: %q; %d requests in %s", tc.mode, replicationError(d), n, elapsed.Round(time.Millisecond))
			mu.Lock()
			reasons = append(reasons, fmt.Sprintf("%s: %d polls in %s", tc.mode, n, elapsed.Round(100*time.Millisecond)))
			mu.Unlock()
			// Paced by the backoff (200 ms doubling to 5 s): a busy loop would make thousands.
			if n > 20 {
				t.Errorf("%d requests to the misbehaving peer in %s", n, elapsed.Round(time.Millisecond))
			}
			if h := d.head(); h.Revision != kept.Revision || h.Hash != kept.Hash {
				t.Errorf("the follower's state changed: revision %d (%.12s), kept %d (%.12s)", h.Revision, h.Hash, kept.Revision, kept.Hash)
			}
			if got := table(); got != keptTable {
				t.Errorf("the kernel's table changed: %s, was %s", got, keptTable)
			}
			if f := failures(); f <= before {
				t.Errorf("replication failures %d, %d before", f, before)
			}
			m := scrape()
			if !strings.Contains(m, "\nipvsctl_replication_connected 0\n") && tc.mode != "garbage" {
				t.Errorf("ipvsctl_replication_connected is not 0:\n%s", grepLines(m, "ipvsctl_replication"))
			}
			if !strings.Contains(m, "\nipvsctl_replication_failures_total ") {
				t.Errorf("no ipvsctl_replication_failures_total:\n%s", grepLines(m, "ipvsctl_replication"))
			}
			if tc.mode == "huge" {
				w := p.written.Load()
				t.Logf("huge: the peer got %d MiB onto the socket before the follower stopped reading (a document may be %d MiB)", w>>20, httpd.MaxBody>>20)
				// What was read is bounded by MaxBody+1; the rest is in the sockets' buffers.
				if w > httpd.MaxBody+16<<20 {
					t.Errorf("the peer wrote %d bytes before the follower hung up", w)
				}
			}
		})
	}
	if !strings.Contains(d.logs.String(), "replication: peer unreachable") {
		t.Errorf("no failed poll in the log:\n%s", d.logs.String())
	}
	// A peer that behaves again is followed again.
	next := canonical(t, strings.Replace(plainState, "198.18.0.11", "198.18.0.12", 1))
	p.serveGood(next)
	eventually(t, 10*time.Second, "the peer's state taken once it behaves", func() bool {
		return d.head().Hash == store.DocumentHash([]byte(next)) && replicationError(d) == ""
	})
	if m := scrape(); !strings.Contains(m, "\nipvsctl_replication_connected 1\n") {
		t.Errorf("ipvsctl_replication_connected is not 1 again:\n%s", grepLines(m, "ipvsctl_replication"))
	}
	t.Logf("FAULTROW | replication peer hangs up mid-long-poll / garbage under a director's headers / no revision / a body without end (tier 1, real sockets: `TestReplicationPeerMisbehavesFollowerKeepsLastGood`) | the last good revision and the kernel's table; the reason in the status, the log and the metrics; polls paced (%s) | nothing; %d MiB left the endless peer, at most 16 MiB + 1 byte read | the next poll once the peer behaves |",
		strings.Join(reasons, ", "), p.written.Load()>>20)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
