package auth

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

const maxNameChars = 64

// CheckName applies the rule for names of users and tokens: 1..64
// printable characters, no spaces or control characters. Such names go into
// audit lines, logs, URLs and the panel. field names the flag or JSON field.
func CheckName(field, name string) error {
	n := utf8.RuneCountInString(name)
	bad := !utf8.ValidString(name) || n < 1 || n > maxNameChars
	for _, r := range name {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			bad = true
		}
	}
	if !bad {
		return nil
	}
	return &InvalidError{Field: field, Message: fmt.Sprintf("%s is not a valid name (1..%d printable characters without spaces or control characters)",
		quoteShort(name), maxNameChars)}
}

// quoteShort quotes s with its control characters escaped, cut short when
// long, so that an error message stays one readable line.
func quoteShort(s string) string {
	const keep = 40
	if utf8.RuneCountInString(s) <= keep+8 {
		return fmt.Sprintf("%q", s)
	}
	r := []rune(s)
	return fmt.Sprintf("%q... (%d characters)", string(r[:keep]), len(r))
}
