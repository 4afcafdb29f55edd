package trust

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestParseFingerprint(t *testing.T) {
	sum := sha256.Sum256([]byte("cert"))
	want := Prefix + hex.EncodeToString(sum[:])
	colons := strings.ToUpper(hex.EncodeToString(sum[:]))
	var b strings.Builder
	for i := 0; i < len(colons); i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(colons[i : i+2])
	}
	for _, in := range []string{want, strings.ToUpper(want), hex.EncodeToString(sum[:]), "SHA256 Fingerprint=" + b.String(), b.String(), "  " + want + "\n"} {
		got, err := ParseFingerprint(in)
		if err != nil || got != want {
			t.Errorf("ParseFingerprint(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "sha256:", "sha1:" + hex.EncodeToString(sum[:20]), want[:len(want)-1], want + "00", strings.Replace(want, "a", "g", 1), "md5:" + hex.EncodeToString(sum[:])} {
		if got, err := ParseFingerprint(bad); err == nil {
			t.Errorf("ParseFingerprint(%q) = %q, want an error", bad, got)
		}
	}
}

func TestCheckPeerURL(t *testing.T) {
	for _, ok := range []string{"https://198.18.0.2:3636", "http://127.0.0.1:3636", "http://[::1]:1", "http://localhost:3636", "https://d2.example"} {
		if err := CheckPeerURL(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"http://198.18.0.2:3636", "http://127.0.0.1.evil.example", "ftp://x", "198.18.0.2", "https://u:p@198.18.0.2", "http://[::ffff:198.18.0.2]:1"} {
		if err := CheckPeerURL(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func FuzzParseFingerprint(f *testing.F) {
	f.Add("sha256:" + strings.Repeat("ab", 32))
	f.Add("SHA256 Fingerprint=" + strings.TrimSuffix(strings.Repeat("AB:", 32), ":"))
	f.Add("sha256:zz")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseFingerprint(s)
		if err != nil {
			return
		}
		if len(got) != len(Prefix)+64 || !strings.HasPrefix(got, Prefix) {
			t.Fatalf("ParseFingerprint(%q) = %q", s, got)
		}
		if _, err := hex.DecodeString(got[len(Prefix):]); err != nil || strings.ToLower(got) != got {
			t.Fatalf("ParseFingerprint(%q) = %q is not canonical", s, got)
		}
		if again, err := ParseFingerprint(got); err != nil || again != got {
			t.Fatalf("not stable: %q -> %q -> %q, %v", s, got, again, err)
		}
	})
}
