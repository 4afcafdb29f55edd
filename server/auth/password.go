package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// Params are argon2id's costs. Memory is in KiB.
type Params struct {
	Memory  uint32
	Time    uint32
	Threads uint8
	SaltLen uint32
	KeyLen  uint32
}

// DefaultParams suit a director: 64 MiB and one pass over two lanes, about
// 50-100 ms a login on one core, and logins are few; at most
// Config.MaxConcurrentHashes run at once, so memory stays bounded.
func DefaultParams() Params {
	return Params{Memory: 64 * 1024, Time: 1, Threads: 2, SaltLen: 16, KeyLen: 32}
}

// CheapParams are for tests only: the same algorithm and encoding, a
// thousandth of the memory.
func CheapParams() Params {
	return Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}
}

const (
	minPasswordChars = 12
	maxPasswordBytes = 1024
	// maxMemory bounds what a stored hash may ask for (a hand-edited
	// database must not make a login allocate gigabytes).
	maxMemory = 1 << 20
)

// CheckPassword applies the password policy: 12 characters at least. The
// error says how long the password was, never what it was.
func CheckPassword(password string) error {
	if !utf8.ValidString(password) {
		return &InvalidError{Field: "password", Message: "is not valid UTF-8"}
	}
	if n := utf8.RuneCountInString(password); n < minPasswordChars {
		return &InvalidError{Field: "password", Message: fmt.Sprintf("must be at least %d characters (this one has %d)", minPasswordChars, n)}
	}
	if len(password) > maxPasswordBytes {
		return &InvalidError{Field: "password", Message: fmt.Sprintf("must be at most %d bytes (this one has %d)", maxPasswordBytes, len(password))}
	}
	return nil
}

// HashPassword returns password's argon2id hash as a PHC string:
// $argon2id$v=19$m=65536,t=1,p=2$SALT$HASH (unpadded standard base64).
func HashPassword(p Params, password string) (string, error) {
	salt := make([]byte, p.SaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("password salt: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, p.KeyLen)
	release(p.Memory)
	return encodeHash(p, salt, key), nil
}

// release hands argon2id's memory back to the heap at once: without it the
// garbage collector lets the heap grow to twice what the hashing slots
// hold before it collects (GOGC), and parallel logins would take as much
// again. A collection costs a few milliseconds beside a 50 ms hash.
func release(memoryKiB uint32) {
	if memoryKiB >= 8<<10 {
		runtime.GC()
	}
}

func encodeHash(p Params, salt, key []byte) string {
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.Memory, p.Time, p.Threads,
		b64.EncodeToString(salt), b64.EncodeToString(key))
}

var errBadHash = errors.New("stored password hash is not an argon2id PHC string")

// parseHash reads a PHC string written by HashPassword.
func parseHash(encoded string) (p Params, salt, key []byte, err error) {
	f := strings.Split(encoded, "$")
	if len(f) != 6 || f[0] != "" || f[1] != "argon2id" || f[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return p, nil, nil, errBadHash
	}
	if _, err := fmt.Sscanf(f[3], "m=%d,t=%d,p=%d", &p.Memory, &p.Time, &p.Threads); err != nil {
		return p, nil, nil, errBadHash
	}
	if p.Memory == 0 || p.Memory > maxMemory || p.Time == 0 || p.Time > 16 || p.Threads == 0 {
		return p, nil, nil, errBadHash
	}
	b64 := base64.RawStdEncoding
	if salt, err = b64.DecodeString(f[4]); err != nil || len(salt) < 8 {
		return p, nil, nil, errBadHash
	}
	if key, err = b64.DecodeString(f[5]); err != nil || len(key) < 16 {
		return p, nil, nil, errBadHash
	}
	p.SaltLen, p.KeyLen = uint32(len(salt)), uint32(len(key))
	return p, salt, key, nil
}

// VerifyPassword reports whether password matches the PHC string encoded,
// comparing in constant time.
func VerifyPassword(encoded, password string) (bool, error) {
	p, salt, key, err := parseHash(encoded)
	if err != nil {
		return false, err
	}
	got := argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, p.KeyLen)
	release(p.Memory)
	return subtle.ConstantTimeCompare(got, key) == 1, nil
}

// needsRehash reports a hash made with other costs than p.
func needsRehash(encoded string, p Params) bool {
	q, _, _, err := parseHash(encoded)
	return err != nil || q.Memory != p.Memory || q.Time != p.Time || q.Threads != p.Threads || q.KeyLen != p.KeyLen
}
