package httpd

import (
	"os"

	"github.com/ipvsctl/ipvsctl/server/trust"
)

// SelfSigned returns the paths of this director's own certificate and key,
// made on first use and kept in dir (its host name and interface addresses
// in the SAN): the panel and the API are then served over TLS from the
// first start, with a certificate the peer director pins by fingerprint
// (ipvsctl node show prints it) and the operator may replace.
func SelfSigned(dir string) (cert, key string, err error) {
	host, _ := os.Hostname()
	return trust.SelfSigned(dir, host, trust.LocalIPs())
}
