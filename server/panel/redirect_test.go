package panel

import (
	"net/url"
	"strings"
	"testing"
)

var redirectPayloads = []string{
	"/./%5Cevil.example/", "/%09/evil.example/", "//evil.example", "/\\evil.example", "/%5Cevil.example",
	"https://evil.example/", "javascript:alert(1)", "/%0d%0aLocation:%20https://evil.example", "/\t/evil.example",
	"/%2F/evil.example", "/.%2F/evil.example", "/..//evil.example", "/%20/evil.example", "\\\\evil.example",
	"/\u2028/evil.example", "evil.example", "", " /services", "/\x00x", "/%00x", "/%E2%80%A8/evil.example",
}

// Every payload that could leave the panel is refused, as next= and as
// "back"; local paths stay, cleaned.
func TestRedirectsStayOnThePanel(t *testing.T) {
	for _, p := range redirectPayloads {
		if got := LocalPath(p); got != "" && !onPanel(got) {
			t.Errorf("LocalPath(%q) = %q leaves the panel", p, got)
		}
		if got := safeNext(p); !onPanel(got) {
			t.Errorf("safeNext(%q) = %q leaves the panel", p, got)
		}
	}
	for _, p := range []string{"/./%5Cevil.example/", "/%09/evil.example/", "//x", "/\\x", "https://x/", "/%0aLocation"} {
		if got := LocalPath(p); got != "" {
			t.Errorf("LocalPath(%q) = %q, want refused", p, got)
		}
	}
	for in, want := range map[string]string{
		"/services/web?tab=servers": "/services/web?tab=servers",
		"/services/./web/../web/":   "/services/web/",
		"/live#top":                 "/live",
		"/history?rev=3&x=%2F":      "/history?rev=3&x=%2F",
	} {
		if got := LocalPath(in); got != want {
			t.Errorf("LocalPath(%q) = %q, want %q", in, got, want)
		}
	}
	if safeNext("/login?next=/x") != "/" || safeNext("//x") != "/" {
		t.Error("safeNext lets the login page or another host through")
	}
}

// onPanel: a browser on https://panel.example/login resolving the
// Location lands on panel.example, without backslashes a browser would
// turn into slashes.
func onPanel(loc string) bool {
	base, _ := url.Parse("https://panel.example/login")
	u, err := url.Parse(loc)
	if err != nil {
		return false
	}
	r := base.ResolveReference(u)
	return r.Host == "panel.example" && r.Scheme == "https" && strings.HasPrefix(loc, "/") && !strings.HasPrefix(loc, "//") &&
		!strings.ContainsAny(loc, "\\\t\r\n") && !hasUnsafe(loc)
}

func FuzzLocalPath(f *testing.F) {
	for _, p := range redirectPayloads {
		f.Add(p)
	}
	f.Add("/services/web?tab=1")
	f.Fuzz(func(t *testing.T, s string) {
		got := LocalPath(s)
		if got == "" {
			return
		}
		if !onPanel(got) {
			t.Fatalf("LocalPath(%q) = %q leaves the panel", s, got)
		}
		if again := LocalPath(got); again != got {
			t.Fatalf("LocalPath is not stable: %q -> %q -> %q", s, got, again)
		}
	})
}
