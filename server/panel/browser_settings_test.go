package panel

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
	"github.com/ipvsctl/ipvsctl/server/panel/browsertest"
)

// The settings page's maintenance directory, in a real Chromium: a
// relative path is refused beside the field with the value, an absolute
// one stored as settings.maintenance_dir, a blank one clears it. The
// screenshot settings.png shows the page with it set.
func TestBrowserSettingsMaintenanceDir(t *testing.T) {
	if testing.Short() {
		testenv.OptIn(t, "browser test skipped in -short mode")
	}
	e := newEnv(t)
	e.seed(t, demoState())
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	b := browsertest.Start(t, 60*time.Second)
	u := srv.URL
	b.Login(u+"/live", "alice", "pw-alice", "#live")
	save := func(what, dir, wait string) {
		t.Helper()
		b.Do(what, chromedp.Navigate(u+"/settings"), chromedp.WaitVisible(chromedp.CSS("#s-maintenance")),
			chromedp.Clear(chromedp.CSS("#s-maintenance")), chromedp.SendKeys(chromedp.CSS("#s-maintenance"), dir),
			chromedp.Click(chromedp.CSS("form[action='/settings'] button.primary")),
			chromedp.WaitVisible(chromedp.CSS(wait)))
	}
	stored := func() string {
		t.Helper()
		st, _, err := e.core.State(b.Ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.Settings.MaintenanceDir
	}

	save("a relative directory", "ha.d/maintenance", "#maintenance_dir-err")
	if s := b.Text("#maintenance_dir-err"); !strings.Contains(s, `"ha.d/maintenance" is not a clean absolute path`) {
		t.Errorf("beside the field: %q", s)
	}
	if got := stored(); got != "" {
		t.Errorf("a refused form stored maintenance_dir %q", got)
	}
	save("a maintenance directory", "/etc/ha.d/maintenance", ".banner.flash")
	if got := stored(); got != "/etc/ha.d/maintenance" {
		t.Fatalf("maintenance_dir %q after the form", got)
	}
	b.Do("the settings page", chromedp.Navigate(u+"/settings"), chromedp.WaitVisible(chromedp.CSS("#s-maintenance")))
	if v := b.Eval(`document.querySelector("#s-maintenance").value`); v != "/etc/ha.d/maintenance" {
		t.Errorf("the field shows %q", v)
	}
	b.FitsWidth("the settings page")
	b.Shot("settings")
	save("no maintenance directory", "", ".banner.flash")
	if got := stored(); got != "" {
		t.Errorf("maintenance_dir %q after a blank field", got)
	}
}
