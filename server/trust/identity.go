package trust

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Identity file names, beside the database.
const (
	CertFile = "tls-self-signed.crt"
	KeyFile  = "tls-self-signed.key"
)

// IdentityPaths are the director's own certificate and key in dir.
func IdentityPaths(dir string) (cert, key string) {
	return filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)
}

// SelfSigned returns the paths of this director's certificate and key,
// made on first use and kept in dir: host, localhost, the loopback
// addresses and ips in its SAN, so that a peer or a browser given one of
// this director's addresses finds it named there. An existing pair is kept
// (its fingerprint is what the peer pinned); its key is forced to 0600.
func SelfSigned(dir, host string, ips []net.IP) (cert, key string, err error) {
	cert, key = IdentityPaths(dir)
	if _, err := os.Stat(cert); err == nil {
		if _, err := os.Stat(key); err == nil {
			if err := os.Chmod(key, 0o600); err != nil {
				return "", "", fmt.Errorf("restrict %s to its owner: %w", key, err)
			}
			return cert, key, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", "", err
	}
	certPEM, keyPEM, err := NewCertificate(host, ips, time.Now())
	if err != nil {
		return "", "", err
	}
	if err := writeFile(key, keyPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := writeFile(cert, certPEM, 0o644); err != nil {
		return "", "", err
	}
	return cert, key, nil
}

func writeFile(path string, b []byte, mode os.FileMode) error {
	if err := os.WriteFile(path, b, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(path, mode); err != nil { // an existing file keeps its mode through WriteFile
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	return nil
}

// NewCertificate makes a P-256 key and a certificate for it, self-signed,
// valid five years from now, for host, localhost and ips (and loopback).
func NewCertificate(host string, ips []net.IP, now time.Time) (certPEM, keyPEM []byte, err error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("make a key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, nil, fmt.Errorf("make a serial number: %w", err)
	}
	names := []string{"localhost"}
	if host != "" && host != "localhost" {
		names = append([]string{host}, names...)
	}
	all := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	for _, ip := range ips {
		if ip != nil && !slices.ContainsFunc(all, ip.Equal) {
			all = append(all, ip)
		}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "ipvsctl " + host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(5, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     names,
		IPAddresses:  all,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		return nil, nil, fmt.Errorf("make a certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		return nil, nil, fmt.Errorf("encode the key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// LocalIPs are this machine's interface addresses (for the SAN).
func LocalIPs() []net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var ips []net.IP
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLinkLocalUnicast() {
			ips = append(ips, n.IP)
		}
	}
	return ips
}
