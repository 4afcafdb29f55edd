package regularfile

import (
	"bytes"
	"fmt"
	"io"
)

// maxSecret bounds a secret file: a token is 60 bytes.
const maxSecret = 4 << 10

// ReadSecret reads a secret (an API token) from a file, once: a regular
// file (Open's rules) that only its owner may read, at most 4 KiB, one line
// whose trailing line end is dropped. Given a file instead of a flag, the
// secret stays out of /proc/PID/cmdline, which every local user reads.
func ReadSecret(path string) (string, error) {
	f, err := Open(path, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("%s: mode %04o lets its group or others read it (chmod 600)", path, perm)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSecret+1))
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > maxSecret {
		return "", fmt.Errorf("%s: longer than %d bytes: not a token", path, maxSecret)
	}
	b = bytes.TrimRight(b, "\r\n")
	if len(b) == 0 {
		return "", fmt.Errorf("%s: empty", path)
	}
	if bytes.ContainsAny(b, "\r\n\t ") {
		return "", fmt.Errorf("%s: holds more than one line or blanks: want the token alone", path)
	}
	return string(b), nil
}
