// Package edge is what every answer of the daemon's one HTTP router gets,
// the panel's and the API's alike: the security headers, the refusal of
// unsafe requests from another site, and path values decoded.
package edge

import (
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"
)

// CSP allows only the daemon's own scripts, styles and images (no inline
// script, no framing, no plugin, forms posted only to itself).
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Headers sets the security headers on every answer: CSP, no framing, no
// sniffing, no referrer to other sites.
func Headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// CrossOrigin refuses unsafe methods (POST, PUT, PATCH, DELETE) a browser
// sends from another origin, with net/http's CrossOriginProtection; deny
// answers the refusal (nil: a plain 403). Requests without Sec-Fetch-Site
// or Origin (curl, the CLI, scripts with a bearer token) are not from a
// browser and pass. trusted (scheme://host[:port]) are origins allowed
// besides the daemon's own, e.g. a proxy's public name.
func CrossOrigin(trusted []string, deny http.Handler) (func(http.Handler) http.Handler, error) {
	c := http.NewCrossOriginProtection()
	for _, o := range trusted {
		if err := c.AddTrustedOrigin(o); err != nil {
			return nil, err
		}
	}
	if deny != nil {
		c.SetDenyHandler(deny)
	}
	return c.Handler, nil
}

// DecodePath gives a route's handler its path values (r.PathValue) decoded,
// as net/http's ServeMux does: chi matches an escaped path on its raw form,
// so a service named "a/b" is /services/a%2Fb and its {id} would read
// "a%2Fb". Wrap each route's handler (the values are known once routed).
func DecodePath(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rc := chi.RouteContext(r.Context()); rc != nil && r.URL.RawPath != "" {
			for i, k := range rc.URLParams.Keys {
				if v, err := url.PathUnescape(rc.URLParams.Values[i]); err == nil {
					r.SetPathValue(k, v)
				}
			}
		}
		h.ServeHTTP(w, r)
	})
}
