package panel

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
	"github.com/ipvsctl/ipvsctl/server/panel/browsertest"
)

// The import page shows the report the CLI prints, in a real Chromium: the
// summary, each warning with its line; a refused file's line; the keywords
// passed over when "Ignore unknown keywords" is ticked.
func TestBrowserImportReport(t *testing.T) {
	if testing.Short() {
		testenv.OptIn(t, "browser test skipped in -short mode")
	}
	e := newEnv(t)
	e.seed(t, demoState())
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	good := filepath.Join(dir, "lb1.conf")
	doc := "global_defs {\n  router_id lb1\n}\nvirtual_server 198.18.0.100 80 {\n  lb_kind DR\n  protocol TCP\n  hysteresis 1\n" +
		"  real_server 198.18.0.11 8080 {\n    weight 2\n  }\n  real_server 198.18.0.12 80 {\n  }\n}\n"
	typo := filepath.Join(dir, "typo.conf")
	for p, text := range map[string]string{good: doc, typo: strings.Replace(doc, "weight 2", "weigth 2", 1)} {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b := browsertest.Start(t, 60*time.Second)
	u := srv.URL
	b.Login(u+"/live", "alice", "pw-alice", "#live")
	upload := func(what, file string, ignore bool) {
		t.Helper()
		steps := []chromedp.Action[chromedp.Void]{chromedp.Navigate(u + "/import"),
			chromedp.SetValue(chromedp.CSS("#imp-format"), "keepalived"),
			chromedp.SetUploadFiles(chromedp.CSS("#imp-file"), []string{file})}
		if ignore {
			steps = append(steps, chromedp.Click(chromedp.CSS("#imp-ignore")))
		}
		steps = append(steps, chromedp.Click(chromedp.CSS("form[action='/import'] button")))
		b.Do(what, steps...)
	}

	upload("preview", good, false)
	b.Do("summary", chromedp.WaitVisible(chromedp.CSS("#import-summary")))
	if s := b.Text("#import-summary"); s != "Read lb1.conf: 1 virtual services, 2 real servers, 2 kept." {
		t.Errorf("summary: %q", s)
	}
	if s := b.Text("#import-warnings"); !strings.Contains(s, "8\tWARNING - virtual server 198.18.0.100:80 and real server 198.18.0.11:8080 ports don't match - resetting") ||
		!strings.Contains(s, "no scheduler set, setting default 'wlc'") {
		t.Errorf("warnings: %q", s)
	}
	b.Shot("import-report")

	upload("refused", typo, false)
	b.Do("refusal", chromedp.WaitVisible(chromedp.CSS("#import-refused")))
	if s := b.Text("#import-refused"); !strings.Contains(s, "Refused at line 9") || !strings.Contains(s, `unknown keyword "weigth"`) {
		t.Errorf("refusal: %q", s)
	}
	b.Shot("import-refused")

	upload("ignore unknown", typo, true)
	b.Do("ignored", chromedp.WaitVisible(chromedp.CSS("#import-ignored")))
	if s := b.Text("#import-ignored"); !strings.Contains(s, "9\tunknown keyword \"weigth\"") {
		t.Errorf("ignored: %q", s)
	}
	if s := b.Text("#import-summary"); !strings.Contains(s, "1 virtual services, 2 real servers, 2 kept") {
		t.Errorf("summary with --ignore-unknown: %q", s)
	}
	b.Shot("import-ignored")
}
