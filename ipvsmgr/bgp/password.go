package bgp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// ReadPasswords reads the TCP MD5 key of every peer of s that names a
// password_file, by file. An error names the field (under field, e.g.
// "settings.bgp") and the file, never the key.
func ReadPasswords(field string, s ipvsmgr.BGP) (map[string]string, error) {
	out := map[string]string{}
	var errs []error
	for i, p := range s.Peers {
		if p.PasswordFile == "" {
			continue
		}
		if _, done := out[p.PasswordFile]; done {
			continue
		}
		key, err := ReadPasswordFile(p.PasswordFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.peers[%d].password_file: %w", field, i, err))
			continue
		}
		out[p.PasswordFile] = key
	}
	return out, errors.Join(errs...)
}

// ReadPasswordFile reads one TCP MD5 key: the file's bytes, a trailing line
// end dropped, 1..80 bytes without NUL. The file must be a regular file
// that its group and others cannot read, write or run (chmod 600), as the
// VRRP key files; it is opened without blocking, so a FIFO put in its
// place is refused rather than waited on.
func ReadPasswordFile(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%s: no such file", path)
		}
		if errors.Is(err, syscall.ELOOP) {
			return "", fmt.Errorf("%s: a symbolic link (name the file itself)", path)
		}
		return "", fmt.Errorf("%s: %w", path, errors.Unwrap(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s: not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("%s: mode %04o lets its group or others at it (chmod 600)", path, perm)
	}
	const most = ipvsmgr.MaxMD5Key + 2 // and "\r\n"
	raw, err := io.ReadAll(io.LimitReader(f, most+1))
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	key := raw
	if k, ok := bytes.CutSuffix(raw, []byte("\n")); ok {
		key = bytes.TrimSuffix(k, []byte("\r"))
	}
	switch {
	case len(raw) > most || len(key) > ipvsmgr.MaxMD5Key:
		return "", fmt.Errorf("%s: longer than a TCP MD5 key's %d bytes", path, ipvsmgr.MaxMD5Key)
	case len(key) == 0:
		return "", fmt.Errorf("%s: empty (a TCP MD5 key is 1..%d bytes)", path, ipvsmgr.MaxMD5Key)
	case bytes.IndexByte(key, 0) >= 0:
		return "", fmt.Errorf("%s: holds a NUL byte, which a TCP MD5 key cannot", path)
	}
	return string(key), nil
}
