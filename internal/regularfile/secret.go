package regularfile

import (
	"bytes"
	"fmt"
	"io"
)

// ReadPrivate reads a small file that only its owner may read (a key, a
// password, a token): a regular file (Open's rules) of mode 0600 or
// tighter, at most most bytes. The bytes are as in the file: each caller
// says what a line end means to it.
func ReadPrivate(path string, most int) ([]byte, error) {
	f, err := Open(path, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%s: mode %04o lets its group or others at it (chmod 600)", path, perm)
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(most)+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > most {
		return nil, fmt.Errorf("%s: longer than %d bytes", path, most)
	}
	return b, nil
}

// maxSecret bounds a secret file: a token is 60 bytes.
const maxSecret = 4 << 10

// ReadSecret reads a secret (an API token) from a file, once: a private
// file (ReadPrivate), at most 4 KiB, one line whose trailing line end is
// dropped. Given a file instead of a flag, the secret stays out of
// /proc/PID/cmdline, which every local user reads.
func ReadSecret(path string) (string, error) {
	b, err := ReadPrivate(path, maxSecret)
	if err != nil {
		return "", err
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
