package httpd_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/httpd"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// The panel honours --trusted-origin as the API does: a form posted from the
// proxy's public origin is let through, from any other origin refused.
func TestPanelHonoursTrustedOrigin(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "ipvsctl.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	core := server.New(server.Config{Store: st})
	a := auth.New(st, auth.Config{Params: auth.CheapParams()})
	opts := httpd.Options{Core: core, Auth: a, TrustedOrigins: []string{"https://lb.example"}}
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
	defer srv.Close()
	post := func(origin string) int {
		req, _ := http.NewRequest("POST", srv.URL+"/login", strings.NewReader(url.Values{"user": {"x"}, "password": {"y"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "text/html")
		req.Header.Set("Origin", origin)
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("https://evil.example"); code != http.StatusForbidden {
		t.Errorf("a form from another origin: %d, want 403", code)
	}
	if code := post("https://lb.example"); code != http.StatusUnauthorized {
		t.Errorf("a form from the trusted origin: %d, want the login page's 401 (wrong password)", code)
	}
}
