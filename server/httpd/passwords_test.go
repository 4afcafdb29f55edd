package httpd_test

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/httpd"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// panelOver serves the panel and the API with real argon2id costs (64 MiB
// a hash) on a real socket.
func panelOver(t *testing.T) (string, *auth.Auth, *store.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "ipvsctl.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	core := server.New(server.Config{Store: st})
	a := auth.New(st, auth.Config{Params: auth.DefaultParams()})
	if err := a.AddUser(ctx, &auth.Principal{User: "root", Via: "cli"}, "vera", auth.Viewer, "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	opts := httpd.Options{Core: core, Auth: a}
	pnl, err := httpd.NewPanel(core, a, time.Now(), opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Panel = pnl
	h, err := httpd.Handler(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, a, st
}

func browser(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func postForm(t *testing.T, c *http.Client, u string, v url.Values) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", u, strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "text/html")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// rssBytes is this process's resident set now.
func rssBytes(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// 24 parallel password changes with a wrong current password, each asking
// argon2id for 64 MiB, go through the hashing slots: never more than 2
// hashes run at once (what bounds their memory; the process's RSS is only
// logged, the machine's allocator decides it), the attempts past the limit
// are answered 429 with Retry-After without a hash, and they are audited.
func TestParallelPasswordChangesStayBounded(t *testing.T) {
	base, a, st := panelOver(t)
	c := browser(t)
	if r := postForm(t, c, base+"/login", url.Values{"user": {"vera"}, "password": {"correct horse battery"}, "next": {"/account"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", r.StatusCode)
	}
	runtime.GC()
	debug.FreeOSMemory()
	before, hashed := rssBytes(t), a.HashStats()
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if r := rssBytes(t); r > peak.Load() {
				peak.Store(r)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	codes := make([]int, 24)
	retry := make([]string, 24)
	for i := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := postForm(t, c, base+"/account/password", url.Values{"old": {"not the password " + strconv.Itoa(i)},
				"new": {"a new password 1234"}, "again": {"a new password 1234"}})
			codes[i], retry[i] = r.StatusCode, r.Header.Get("Retry-After")
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	after := a.HashStats()
	t.Logf("RSS %d MB before, peak %d MB during 24 parallel password changes: +%d MB; hashing slots %+v",
		before>>20, peak.Load()>>20, (peak.Load()-before)>>20, after)
	if after.Peak > 2 || after.Slots != 2 {
		t.Errorf("%d hashes ran at once in %d slots, want at most 2", after.Peak, after.Slots)
	}
	n := after.Hashes - hashed.Hashes
	if n < 1 || n > 5 {
		t.Errorf("%d password checks hashed, want 1..5 (those let through before the failure limit, one user waiting at most one at a time)", n)
	}
	var wrong, limited int
	for i, code := range codes {
		switch {
		case code == http.StatusUnprocessableEntity:
			wrong++
		case code == http.StatusTooManyRequests && retry[i] != "":
			limited++
		default:
			t.Errorf("change %d: %d (Retry-After %q)", i, code, retry[i])
		}
	}
	if int64(wrong) != n || wrong+limited != 24 {
		t.Fatalf("%d wrong, %d limited; want the %d hashed wrong and the rest limited", wrong, limited, n)
	}
	// The refusals of a busy queue are written a second at a time.
	var es []store.AuditEntry
	audited := 0
	for deadline := time.Now().Add(10 * time.Second); audited != 24 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var err error
		if es, err = st.Audit(context.Background(), store.AuditFilter{Action: "password change"}); err != nil {
			t.Fatal(err)
		}
		audited = 0
		for _, e := range es {
			audited += e.Repeats
		}
	}
	if audited != 24 || len(es) < 2 || len(es) > 3 { // wrong password; refused: failures; refused: one waiting already
		t.Fatalf("audit: %d attempts in %d rows: %+v", audited, len(es), es)
	}
	// The login page is limited too: 429 with Retry-After.
	for range 5 {
		postForm(t, browser(t), base+"/login", url.Values{"user": {"vera"}, "password": {"wrong"}})
	}
	if r := postForm(t, browser(t), base+"/login", url.Values{"user": {"vera"}, "password": {"correct horse battery"}}); r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Fatalf("login past the limit: %d, Retry-After %q", r.StatusCode, r.Header.Get("Retry-After"))
	}
}
