package httpd

import (
	"fmt"
	"net/http"
	"os"
)

// HSTS tells browsers to come back over HTTPS only (a year): for the TLS
// listener's handler.
func HSTS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Strict-Transport-Security", "max-age=31536000")
		next.ServeHTTP(w, r)
	})
}

// RestrictKey makes a private key file its owner's only (0600).
func RestrictKey(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("TLS key: %w", err)
	}
	if fi.Mode().Perm()&0o077 == 0 {
		return nil
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return fmt.Errorf("restrict the TLS key %s to its owner: %w", path, err)
	}
	return nil
}
