package trust

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Directors is whom a director believes on the link between directors,
// both ways: when it calls a peer (the certificate the peer's API shows)
// and when a peer calls it (the client certificate the caller shows).
// A certificate is believed when its fingerprint is pinned, or when the
// pair CA signed it for the address it is used from.
type Directors struct {
	// Pins are canonical fingerprints (ParseFingerprint).
	Pins []string
	// CA is the pair CA's certificates (nil: pins only).
	CA *x509.CertPool
}

// Empty says nothing is trusted.
func (d Directors) Empty() bool { return len(d.Pins) == 0 && d.CA == nil }

// ParseCA reads a pair CA: one or more PEM certificates, each a CA. The
// error says which block is wrong.
func ParseCA(pemBytes []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for rest := pemBytes; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		n++
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %d is a %q, not a CERTIFICATE", n, blk.Type)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", n, err)
		}
		if !c.IsCA || !c.BasicConstraintsValid {
			return nil, fmt.Errorf("PEM block %d (%s) is not a CA certificate (basicConstraints CA:TRUE)", n, c.Subject)
		}
		pool.AddCert(c)
	}
	if n == 0 {
		return nil, errors.New("no PEM certificate in it")
	}
	return pool, nil
}

// verify believes chain (leaf first) for name (an IP address or a DNS
// name: the CA-signed leaf must carry it in its SAN) and usage.
func (d Directors) verify(chain []*x509.Certificate, name string, usage x509.ExtKeyUsage, now time.Time, who string) (string, error) {
	if len(chain) == 0 {
		return "", &UntrustedError{Reason: who + " showed no certificate"}
	}
	leaf := chain[0]
	got := Fingerprint(leaf.Raw)
	if slices.Contains(d.Pins, got) {
		if now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
			return got, &UntrustedError{Got: got, Reason: fmt.Sprintf("%s's pinned certificate is valid only from %s to %s", who,
				leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))}
		}
		return got, nil
	}
	if d.CA == nil {
		return got, &UntrustedError{Want: strings.Join(d.Pins, " or "), Got: got,
			Reason: fmt.Sprintf("%s's certificate's fingerprint is %s, not the pinned %s", who, got, orNone(d.Pins))}
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: d.CA, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}})
	if err != nil {
		return got, &UntrustedError{Got: got, Reason: fmt.Sprintf("%s's certificate (fingerprint %s) is neither pinned nor signed by the pair CA: %v", who, got, err)}
	}
	if err := leaf.VerifyHostname(name); err != nil {
		return got, &UntrustedError{Got: got, Reason: fmt.Sprintf("%s's certificate is signed by the pair CA but not for %s: %v", who, name, err)}
	}
	return got, nil
}

func orNone(pins []string) string {
	if len(pins) == 0 {
		return "one (none is pinned)"
	}
	return strings.Join(pins, ", ")
}

// VerifyCaller believes a peer director calling this one: the client
// certificate chain it showed, from remote (its address, which a
// CA-signed certificate must name in its SAN). It returns the leaf's
// fingerprint (the caller's identity) and an *UntrustedError.
func (d Directors) VerifyCaller(chain []*x509.Certificate, remote netip.Addr, now time.Time) (string, error) {
	return d.verify(chain, remote.Unmap().String(), x509.ExtKeyUsageClientAuth, now, "the caller")
}

// ClientConfig is the TLS configuration a director calls a peer at host
// with: it believes the peer's certificate as Directors says (the peer's
// address or name in the SAN when the pair CA signed it; no system root,
// the URL's name alone proves nothing), and shows own as its client
// certificate so that the peer can believe it in turn.
func (d Directors) ClientConfig(host string, own *tls.Certificate, now func() time.Time) *tls.Config {
	if now == nil {
		now = time.Now
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The chain is checked below, against the pins and the pair CA only.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := d.verify(cs.PeerCertificates, host, x509.ExtKeyUsageServerAuth, now(), "the peer")
			return err
		},
	}
	if own != nil {
		cfg.Certificates = []tls.Certificate{*own}
	}
	return cfg
}

// ServerConfig is what a director's TLS listener adds: it asks every client
// for a certificate, and requires none at the handshake (the panel's
// browsers and the operators' CLI show none); a peer director's call is
// checked against its certificate at the request (VerifyCaller).
func ServerConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, ClientAuth: tls.RequestClientCert}
}

// RemoteAddr is the address of a request's RemoteAddr ("ip:port").
func RemoteAddr(hostport string) netip.Addr {
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		h = hostport
	}
	a, _ := netip.ParseAddr(h)
	return a.Unmap()
}
