// Package trust is how the directors of a pair (or of N) know each other:
// each has its own key and certificate (self-signed, made on first start,
// its addresses and host name in the SAN; or the operator's), and a peer
// is believed only when the certificate it shows has a SHA-256 fingerprint
// its operator pinned (ipvsctl node set --peer-fingerprint,
// --follower-fingerprint) or the pair CA signed it for the address it is
// used at (--peer-ca). Both ways: the caller checks the called director's
// server certificate, the called one the caller's client certificate
// (mutual.go). No system root is consulted: a certificate any other CA
// signed is refused like any other.
package trust

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"
)

// Prefix is the canonical fingerprint's algorithm label.
const Prefix = "sha256:"

// Fingerprint is the canonical fingerprint of a DER certificate:
// sha256: then 64 lower-case hex digits.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return Prefix + hex.EncodeToString(sum[:])
}

// ParseFingerprint reads a SHA-256 certificate fingerprint as operators
// copy it: "sha256:ab12...", openssl's "SHA256 Fingerprint=AB:12:...", or
// bare hex with or without colons, any case. It returns the canonical form.
func ParseFingerprint(s string) (string, error) {
	v := strings.TrimSpace(s)
	low := strings.ToLower(v)
	for _, p := range []string{"sha256 fingerprint=", "sha256:", "sha-256:"} {
		if strings.HasPrefix(low, p) {
			low = low[len(p):]
			break
		}
	}
	low = strings.ReplaceAll(low, ":", "")
	if len(low) != 2*sha256.Size {
		return "", fmt.Errorf("%q is not a SHA-256 fingerprint (want sha256: and 64 hex digits, as ipvsctl node show prints it)", s)
	}
	if _, err := hex.DecodeString(low); err != nil {
		return "", fmt.Errorf("%q is not a SHA-256 fingerprint (want sha256: and 64 hex digits, as ipvsctl node show prints it)", s)
	}
	return Prefix + low, nil
}

// CertFingerprint is the fingerprint of the first certificate in a PEM file.
func CertFingerprint(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read certificate: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return "", fmt.Errorf("%s: no PEM certificate in it", path)
	}
	return Fingerprint(blk.Bytes), nil
}

// UntrustedError is a peer refused during the TLS handshake, before any
// request (and so any token) was sent to it.
type UntrustedError struct {
	Want, Got string // fingerprints
	Reason    string
}

func (e *UntrustedError) Error() string {
	if e.Reason != "" {
		return "peer not trusted: " + e.Reason
	}
	return fmt.Sprintf("peer not trusted: its certificate's fingerprint is %s, not the pinned %s", e.Got, e.Want)
}

// PinnedConfig is a TLS client configuration that believes exactly one
// certificate, the one of fingerprint want, in its validity period; the
// name in the URL and the system's roots play no part.
func PinnedConfig(want string, now func() time.Time) *tls.Config {
	if now == nil {
		now = time.Now
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The chain is checked below, against the pin alone.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return &UntrustedError{Want: want, Reason: "it showed no certificate"}
			}
			leaf := cs.PeerCertificates[0]
			got := Fingerprint(leaf.Raw)
			if got != want {
				return &UntrustedError{Want: want, Got: got}
			}
			if t := now(); t.Before(leaf.NotBefore) || t.After(leaf.NotAfter) {
				return &UntrustedError{Want: want, Got: got, Reason: fmt.Sprintf("its pinned certificate is valid only from %s to %s",
					leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))}
			}
			return nil
		},
	}
}

// ErrPlainHTTP refuses an http:// peer that is not on loopback.
var ErrPlainHTTP = errors.New("an http:// peer is allowed on loopback only (tests); give its https:// URL and --peer-fingerprint")

// CheckPeerURL says whether u may be a peer: https://, or http:// to a
// loopback address (tests on one machine).
func CheckPeerURL(u string) error {
	pu, err := url.Parse(u)
	if err != nil || pu.Host == "" || (pu.Scheme != "http" && pu.Scheme != "https") {
		return fmt.Errorf("%q is not an https:// URL", u)
	}
	if pu.User != nil {
		return fmt.Errorf("%q: give the token with --peer-token, not in the URL", u)
	}
	if pu.Scheme == "http" && !IsLoopbackHost(pu.Hostname()) {
		return fmt.Errorf("%q: %w", u, ErrPlainHTTP)
	}
	return nil
}

// IsLoopbackHost reports a loopback IP address or the name localhost.
func IsLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.Unmap().IsLoopback()
}

// Leaf parses the first certificate of a PEM block (for tests and show).
func Leaf(pemBytes []byte) (*x509.Certificate, error) {
	blk, _ := pem.Decode(pemBytes)
	if blk == nil {
		return nil, errors.New("no PEM block")
	}
	return x509.ParseCertificate(blk.Bytes)
}

// IsRefusal says whether err is a peer refused for its identity (before any
// request was sent): a certificate that is not the pinned one, or plain
// HTTP where TLS was asked.
func IsRefusal(err error) bool {
	var ue *UntrustedError
	var rh tls.RecordHeaderError
	var ce *tls.CertificateVerificationError
	return errors.As(err, &ue) || errors.As(err, &rh) || errors.As(err, &ce) ||
		(err != nil && strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"))
}
