package vrrp

import (
	"bytes"
	"encoding/hex"
	"fmt"

	"github.com/ipvsctl/ipvsctl/internal/regularfile"
)

// ReadKeyFile reads a shared key as keepalived's auth_hmac "key ID file:PATH"
// does, so that one file serves both: the key as text, or "hex:" and its
// bytes in hex, a trailing line end dropped; 32..64 bytes. Unlike
// keepalived, which only warns, a file that its group or others may read,
// write or run is refused.
func ReadKeyFile(path string) ([]byte, error) {
	raw, err := regularfile.ReadPrivate(path, 4+2*KeyMaxLen+8) // a FIFO would block a plain open forever
	if err != nil {
		return nil, fmt.Errorf("key file %w", err)
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
