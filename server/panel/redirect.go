package panel

import (
	"net/url"
	"path"
	"strings"
)

// LocalPath returns s as a path on the panel, cleaned, or "" if s could
// lead anywhere else: a scheme, a host (//x, and /\x, which browsers read
// as //x), a backslash, a control character or a space in any form
// (raw or percent-encoded: /%09/x and /./%5Cx are refused), or anything
// that does not start with /. The query is kept, the fragment dropped.
func LocalPath(s string) string {
	if s == "" || len(s) > maxLocalPath || !strings.HasPrefix(s, "/") || hasUnsafe(s) {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return ""
	}
	p := u.Path // decoded: %5C is a backslash here, %09 a tab
	if hasUnsafe(p) || !strings.HasPrefix(p, "/") {
		return ""
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	if strings.HasPrefix(clean, "//") {
		return ""
	}
	out := (&url.URL{Path: clean, RawQuery: u.RawQuery}).String()
	// What a browser makes of it must still be this panel's page.
	// Its length is bounded as the input's is, so that cleaning it again
	// gives it back (escaping can triple it).
	if ru, err := url.Parse(out); err != nil || ru.Host != "" || ru.Scheme != "" || !strings.HasPrefix(out, "/") ||
		strings.HasPrefix(out, "//") || hasUnsafe(out) || len(out) > maxLocalPath {
		return ""
	}
	return out
}

// maxLocalPath is the longest path (and query) LocalPath keeps.
const maxLocalPath = 2048

func hasUnsafe(s string) bool {
	for _, r := range s {
		if r < 0x21 || r == 0x7f || r == '\\' || (r >= 0x80 && r < 0xa0) || r == '\u2028' || r == '\u2029' || r == '\ufeff' {
			return true
		}
	}
	return false
}

// safeNext is a local path to go to after logging in ("/" for anything
// else, and for the login page itself).
func safeNext(s string) string {
	p := LocalPath(s)
	if p == "" || p == "/login" || strings.HasPrefix(p, "/login?") || strings.HasPrefix(p, "/login/") {
		return "/"
	}
	return p
}
