package panel

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// A page that many users see alike is rendered once through html/template
// with a marker where each value of one request goes (the user's name, how
// old the data is), and split there; a request writes the pieces with its
// values between them, escaped as html/template escapes text. A marker is
// letters, digits and dashes, which no context escapes, with a random part
// no stored data can guess.
//
// What holes buy (TestHolesRatio, holes_bench_test.go; 1,000 virtual
// services x 10 real servers, the same prepared data rendered both ways;
// four runs on a shared 2-core machine, so the spread is wide): the
// overview (3.8 kB) takes 0.5-1.2 µs and 3 allocations a request through
// its holes against 63-121 µs and about 415 allocations through
// html/template, 67-229x; the live table's polled fragment (211 kB)
// 3.8-4.7 µs and none against 154-327 µs and 274, 41-70x. Kept: far over
// the 1.5x that would be worth this file.
type holes struct{ prefix string }

func newHoles() holes {
	b := make([]byte, 8)
	rand.Read(b)
	return holes{prefix: "ipvsctl-hole-" + hex.EncodeToString(b) + "-"}
}

// mark is the marker of hole i (0..9).
func (h holes) mark(i int) string { return h.prefix + string(rune('0'+i)) + "-" }

// holed is a page split at its holes: parts[0], hole at[0], parts[1], ...
type holed struct {
	parts [][]byte
	at    []int
}

// split cuts a rendering at its markers.
func (h holes) split(b []byte) *holed {
	hp := &holed{}
	prefix := []byte(h.prefix)
	for {
		i := bytes.Index(b, prefix)
		if i < 0 || len(b) < i+len(prefix)+2 {
			break
		}
		n := int(b[i+len(prefix)] - '0')
		hp.parts = append(hp.parts, b[:i])
		hp.at = append(hp.at, n)
		b = b[i+len(prefix)+2:]
	}
	hp.parts = append(hp.parts, b)
	return hp
}

// size is how long the page is with vals in its holes.
func (hp *holed) size(vals []string) int {
	n := 0
	for _, p := range hp.parts {
		n += len(p)
	}
	for _, i := range hp.at {
		n += len(vals[i]) * 6 // at worst every byte escaped
	}
	return n
}

// fill appends the page with vals in its holes, escaped.
func (hp *holed) fill(dst []byte, vals []string) []byte {
	for j, p := range hp.parts {
		dst = append(dst, p...)
		if j < len(hp.at) {
			dst = appendEscaped(dst, vals[hp.at[j]])
		}
	}
	return dst
}

// textEscaper is html/template's escaping of text and quoted attribute
// values, byte for byte, so that a filled page is the page rendered with
// the values.
var textEscaper = strings.NewReplacer("\x00", "\uFFFD", `"`, "&#34;", "&", "&amp;", "'", "&#39;", "+", "&#43;", "<", "&lt;", ">", "&gt;")

func appendEscaped(dst []byte, s string) []byte {
	if !strings.ContainsAny(s, "\x00\"&'+<>") {
		return append(dst, s...)
	}
	return append(dst, textEscaper.Replace(s)...)
}
