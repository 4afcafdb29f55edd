package trust_test

import (
	"crypto/tls"
	"encoding/base64"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/server/trust"
	"github.com/ipvsctl/ipvsctl/server/trust/trusttest"
)

// handshake runs a real TLS handshake on loopback: the server shows
// serverCert and asks for a client certificate (ServerConfig), which it
// then checks with VerifyCaller; the client believes the server as
// clientTrust says and shows own. It returns both sides' verdicts.
func handshake(t *testing.T, serverCert tls.Certificate, serverTrust trust.Directors, clientTrust trust.Directors, own *tls.Certificate) (clientErr, callerErr error) {
	t.Helper()
	cfg := trust.ServerConfig()
	cfg.Certificates = []tls.Certificate{serverCert}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
		if err := tc.Handshake(); err != nil {
			got <- err
			return
		}
		_, err = serverTrust.VerifyCaller(tc.ConnectionState().PeerCertificates, trust.RemoteAddr(c.RemoteAddr().String()), time.Now())
		got <- err
	}()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), clientTrust.ClientConfig("127.0.0.1", own, nil))
	if err != nil {
		<-got
		return err, nil
	}
	defer c.Close()
	return nil, <-got
}

func TestDirectorsBelieveEachOtherBothWays(t *testing.T) {
	srvCert, srvFP := trusttest.SelfSigned(t, "d1", net.ParseIP("198.18.0.1"))
	pinned, pinnedFP := trusttest.SelfSigned(t, "d2", net.ParseIP("198.18.0.2"))
	unpinned, _ := trusttest.SelfSigned(t, "d3", net.ParseIP("198.18.0.3"))
	ca := trusttest.NewCA(t, "pair CA")
	pool, err := trust.ParseCA(ca.PEM)
	if err != nil {
		t.Fatal(err)
	}
	caForHere := ca.Issue(t, "d2", trusttest.Loopback())
	caForOther := ca.Issue(t, "d9", []net.IP{net.ParseIP("198.18.0.66")}, "other.example")
	otherCA := trusttest.NewCA(t, "another CA").Issue(t, "d2", trusttest.Loopback())

	pins := trust.Directors{Pins: []string{pinnedFP}}
	toServer := trust.Directors{Pins: []string{srvFP}}
	for _, tc := range []struct {
		name string
		own  *tls.Certificate
		want string // "" to be believed
	}{
		{"pinned", &pinned, ""},
		{"no client certificate", nil, "showed no certificate"},
		{"unpinned", &unpinned, "not the pinned"},
		{"CA-signed for another name, no CA trusted", &caForOther, "not the pinned"},
	} {
		t.Run("pins/"+tc.name, func(t *testing.T) {
			cerr, err := handshake(t, srvCert, pins, toServer, tc.own)
			if cerr != nil {
				t.Fatalf("the client refused the pinned server: %v", cerr)
			}
			check(t, err, tc.want)
		})
	}
	withCA := trust.Directors{CA: pool}
	for _, tc := range []struct {
		name string
		own  *tls.Certificate
		want string
	}{
		{"CA-signed for the caller's address", &caForHere, ""},
		{"no client certificate", nil, "showed no certificate"},
		{"self-signed", &unpinned, "neither pinned nor signed by the pair CA"},
		{"CA-signed for another name", &caForOther, "not for 127.0.0.1"},
		{"signed by another CA", &otherCA, "neither pinned nor signed by the pair CA"},
	} {
		t.Run("ca/"+tc.name, func(t *testing.T) {
			_, err := handshake(t, srvCert, withCA, toServer, tc.own)
			check(t, err, tc.want)
		})
	}

	// The caller's side: the server's certificate is believed by its pin or
	// as the pair CA's for the URL's address, and nothing else.
	for _, tc := range []struct {
		name   string
		server tls.Certificate
		trust  trust.Directors
		want   string
	}{
		{"pinned server", srvCert, toServer, ""},
		{"unpinned server", unpinned, toServer, "not the pinned"},
		{"CA-signed server for this address", caForHere, withCA, ""},
		{"CA-signed server for another name", caForOther, withCA, "not for 127.0.0.1"},
		{"server signed by another CA", otherCA, withCA, "neither pinned nor signed"},
	} {
		t.Run("client/"+tc.name, func(t *testing.T) {
			cerr, _ := handshake(t, tc.server, pins, tc.trust, &pinned)
			check(t, cerr, tc.want)
			if cerr != nil && !trust.IsRefusal(cerr) {
				t.Errorf("%v is not a refusal", cerr)
			}
		})
	}
}

func check(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	var ue *trust.UntrustedError
	if err == nil || !strings.Contains(err.Error(), want) || !errors.As(err, &ue) {
		t.Fatalf("got %v, want an UntrustedError with %q", err, want)
	}
}

func TestParseCA(t *testing.T) {
	ca := trusttest.NewCA(t, "pair CA")
	if _, err := trust.ParseCA(append(append([]byte{}, ca.PEM...), ca.PEM...)); err != nil {
		t.Fatal(err)
	}
	leaf := ca.Issue(t, "d1", trusttest.Loopback())
	leafPEM := "-----BEGIN CERTIFICATE-----\n" + b64(leaf.Certificate[0]) + "-----END CERTIFICATE-----\n"
	for in, want := range map[string]string{
		"":        "no PEM certificate",
		"not pem": "no PEM certificate",
		leafPEM:   "not a CA certificate",
		"-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n": "not a CERTIFICATE",
	} {
		if _, err := trust.ParseCA([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseCA(%.30q): %v, want %q", in, err, want)
		}
	}
	if a := trust.RemoteAddr("[::ffff:127.0.0.1]:80"); a != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("RemoteAddr: %v", a)
	}
}

func b64(der []byte) string {
	s := base64.StdEncoding.EncodeToString(der)
	var b strings.Builder
	for len(s) > 64 {
		b.WriteString(s[:64] + "\n")
		s = s[64:]
	}
	b.WriteString(s + "\n")
	return b.String()
}

func FuzzParseCA(f *testing.F) {
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"))
	f.Add([]byte("not pem"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		pool, err := trust.ParseCA(b)
		if (pool == nil) == (err == nil) {
			t.Fatalf("ParseCA: pool %v, err %v", pool, err)
		}
	})
}
