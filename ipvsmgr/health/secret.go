package health

import (
	"bytes"

	"github.com/ipvsctl/ipvsctl/internal/regularfile"
)

// maxSecret bounds a password or shared secret read from its file.
const maxSecret = 4096

// readSecret reads a check's password or RADIUS secret from the file the
// document names (the secret itself never is in the document). It is read
// at each run, so a changed password needs no reload; a FIFO or device in
// its place is refused without blocking, and a file its group or others
// may read is refused, as the VRRP and BGP key files are. A trailing line
// end is dropped. "" reads as no password.
func readSecret(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	raw, err := regularfile.ReadPrivate(path, maxSecret)
	if err != nil {
		return "", err
	}
	raw = bytes.TrimSuffix(raw, []byte("\n"))
	raw = bytes.TrimSuffix(raw, []byte("\r"))
	return string(raw), nil
}

// secretFault is the result when a check's secret cannot be read: the
// director's problem, not the real server's.
func secretFault(err error) Result { return fault("password_file: " + shorten(err.Error())) }

func secretFileFault(err error) Result { return fault("secret_file: " + shorten(err.Error())) }
