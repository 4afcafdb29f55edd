package client

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
)

// NewRemote is New for the CLI's --server: with caFile (PEM) an https://
// daemon must show a certificate that is, or chains to, one in that file
// (the daemon's self-signed certificate, or the CA that signed its own),
// and the system's roots are not consulted.
func NewRemote(base, token, caFile string) (*Client, error) {
	c, err := New(base, token)
	if err != nil || caFile == "" {
		return c, err
	}
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("ca-cert: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("ca-cert: %s holds no PEM certificate", caFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	c.hc = &http.Client{Transport: tr}
	return c, nil
}
