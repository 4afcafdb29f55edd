// Package browsertest drives Debian's headless Chromium for the panel's
// browser tests: server/panel's against a fake kernel, scripts/lab's against
// the lab's real one. Only tests import it.
package browsertest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
)

// Chromium is the binary of Debian's chromium package (.ci/run installs it).
const Chromium = "/usr/bin/chromium"

// Browser is one tab of a headless Chromium. Its methods fail the test that
// started it.
type Browser struct {
	t   testing.TB
	Ctx context.Context
	// Dir is where Shot saves: $IPVSCTL_SCREENSHOTS (docs/screenshots when
	// refreshing them), else the test's artefact directory (kept with go
	// test -artifacts, under -outputdir).
	Dir string
}

// Start starts Chromium for t, or skips t when it is not installed. Every
// step shares one deadline, timeout from now; the browser stops when t ends.
func Start(t testing.TB, timeout time.Duration) *Browser {
	t.Helper()
	if _, err := os.Stat(Chromium); err != nil {
		testenv.Need(t, "no Chromium at "+Chromium+" (Debian package chromium): browser test skipped")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(Chromium), chromedp.NoSandbox, chromedp.WindowSize(1360, 900))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() {
		cancelT()
		cancel()
		cancelA() // waits for Chromium to exit
	})
	dir := os.Getenv("IPVSCTL_SCREENSHOTS")
	if dir == "" {
		dir = t.ArtifactDir()
	}
	return &Browser{t: t, Ctx: ctx, Dir: dir}
}

// Do runs steps, failing the test with what on an error.
func (b *Browser) Do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.Ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// Text is the text of the first element sel matches, waiting for it.
func (b *Browser) Text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.Ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// Eval evaluates a JavaScript expression that returns a string.
func (b *Browser) Eval(expr string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.Ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return s
}

// Login logs user in through the login form that opening page shows, and
// waits for waitSel on the page it leads to.
func (b *Browser) Login(page, user, password, waitSel string) {
	b.t.Helper()
	b.Do("log in as "+user, chromedp.Navigate(page),
		chromedp.WaitVisible(chromedp.CSS("#user")),
		chromedp.SendKeys(chromedp.CSS("#user"), user),
		chromedp.SendKeys(chromedp.CSS("#password"), password),
		chromedp.Click(chromedp.CSS("button.primary")),
		chromedp.WaitVisible(chromedp.CSS(waitSel)))
}

// WaitJS evaluates expr (a JavaScript boolean) until it is true, across
// navigations, for at most within.
func (b *Browser) WaitJS(what, expr string, within time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if ok, err := chromedp.Run(b.Ctx, chromedp.Evaluate[bool](expr)); err == nil && ok {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.t.Fatalf("timed out after %s waiting for %s", within, what)
}

// MarkPage marks the page now shown, for WaitInPage.
func (b *Browser) MarkPage() {
	b.t.Helper()
	if _, err := chromedp.Run(b.Ctx, chromedp.Evaluate[bool]("window.__ipvsctlMark = true")); err != nil {
		b.t.Fatalf("mark the page: %v", err)
	}
}

// WaitInPage evaluates expr until it is true on the page MarkPage marked,
// for at most within: the test fails as soon as that page is gone (a reload
// or a navigation), and, on a timeout, shows what describe (a JavaScript
// string) says then.
func (b *Browser) WaitInPage(what, expr, describe string, within time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(within)
	for {
		state, err := chromedp.Run(b.Ctx, chromedp.Evaluate[string](`window.__ipvsctlMark !== true ? "gone" : (`+expr+`) ? "true" : ""`))
		switch {
		case err != nil:
			b.t.Fatalf("waiting for %s: %v", what, err)
		case state == "gone":
			b.t.Fatalf("waiting for %s: the page was reloaded", what)
		case state == "true":
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("timed out after %s waiting for %s, without a reload; at the end: %q", within, what, b.Eval(describe))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// FitsWidth fails the test when the page is wider than the window (1360
// pixels): an operator would have to scroll sideways.
func (b *Browser) FitsWidth(what string) {
	b.t.Helper()
	w, err := chromedp.Run(b.Ctx, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`))
	if err != nil || len(w) != 2 {
		b.t.Fatalf("width of %s: %v %v", what, w, err)
	}
	if w[0] > w[1] {
		b.t.Errorf("%s is %d pixels wide in a window of %d", what, w[0], w[1])
	}
}

// Shot saves a screenshot of the whole page as Dir/name.png.
func (b *Browser) Shot(name string) {
	b.t.Helper()
	b.save(name, chromedp.FullScreenshot(100))
}

// ShotWindow saves a screenshot of what the window shows as Dir/name.png:
// the top of a long page.
func (b *Browser) ShotWindow(name string) {
	b.t.Helper()
	b.save(name, chromedp.CaptureScreenshot())
}

func (b *Browser) save(name string, shot chromedp.Action[[]byte]) {
	b.t.Helper()
	png, err := chromedp.Run(b.Ctx, shot)
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(b.Dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// Dark makes the tab prefer a dark colour scheme, as a browser set so asks.
func (b *Browser) Dark() {
	b.t.Helper()
	b.Do("dark mode", chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		return err
	}))
	if dark, err := chromedp.Run(b.Ctx, chromedp.Evaluate[bool](`matchMedia("(prefers-color-scheme: dark)").matches`)); err != nil || !dark {
		b.t.Fatalf("dark mode not emulated: %v", err)
	}
}
