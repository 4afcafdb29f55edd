package vrrp

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/ipvsctl/ipvsctl/internal/regularfile"
)

// ReadKeyFile reads a shared key as keepalived's auth_hmac "key ID file:PATH"
// does, so that one file serves both: the key as text, or "hex:" and its
// bytes in hex, a trailing line end dropped; 32..64 bytes. Unlike
// keepalived, which only warns, a file that its group or others may read,
// write or run is refused.
func ReadKeyFile(path string) ([]byte, error) {
	f, err := regularfile.Open(path, 0) // a FIFO would block a plain open forever
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("key file %s: mode %04o lets its group or others at it (chmod 600)", path, perm)
	}
	const most = 4 + 2*KeyMaxLen + 8
	raw, err := io.ReadAll(io.LimitReader(f, most+1))
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	if len(raw) > most {
		return nil, fmt.Errorf("key file %s: longer than %d bytes", path, most)
	}
	key, err := DecodeKey(raw)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return key, nil
}

// DecodeKey reads a key's text: "hex:" and hex digits, or the bytes as they
// are; a trailing line end is not part of it.
func DecodeKey(raw []byte) ([]byte, error) {
	raw = bytes.TrimRight(raw, "\r\n")
	key := raw
	if h, ok := bytes.CutPrefix(raw, []byte("hex:")); ok {
		key = make([]byte, hex.DecodedLen(len(h)))
		if _, err := hex.Decode(key, h); err != nil {
			return nil, fmt.Errorf("after hex: %w", err)
		}
	}
	if len(key) < KeyMinLen || len(key) > KeyMaxLen {
		return nil, fmt.Errorf("the key is %d bytes long, not %d..%d", len(key), KeyMinLen, KeyMaxLen)
	}
	return bytes.Clone(key), nil
}
