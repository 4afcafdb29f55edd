package formats

import (
	"errors"
	"fmt"
	"strings"
)

// A MISC_CHECK's misc_path is read as keepalived's misc_path_handler
// (check_misc.c) reads it: the line split into words, quotes removed and
// backslashes kept with the character after them (alloc_strvec_quoted);
// the first word after the keyword, alone, is the command line, split
// again with quotes and escapes (set_script_params_array,
// alloc_strvec_quoted_escaped): \a \b \E \f \n \r \t \v, \xHH, \OOO, \cX,
// else the character itself. A backslash escapes inside single quotes too.

const kaWhite = " \t\f\n\r\v"

// kaQuotedWords is alloc_strvec_quoted_escaped_common (lib/parser.c).
func kaQuotedWords(s string, escapes bool) ([]string, error) {
	var words []string
	i := 0
	for i < len(s) {
		for i < len(s) && strings.IndexByte(kaWhite, s[i]) >= 0 {
			i++
		}
		if i == len(s) {
			break
		}
		var w strings.Builder
		var quote byte
	word:
		for i < len(s) {
			c := s[i]
			switch {
			case c == '\\':
				i++
				if i == len(s) {
					return nil, errors.New("a backslash ends it (missing escape char at end)")
				}
				if !escapes {
					w.WriteByte('\\')
					w.WriteByte(s[i])
					i++
					continue
				}
				w.WriteByte(kaEscape(s, &i))
			case quote != 0 && c == quote:
				quote = 0
				i++
			case quote != 0:
				w.WriteByte(c)
				i++
			case c == '"' || c == '\'':
				quote = c
				i++
			case strings.IndexByte(kaWhite, c) >= 0:
				break word
			default:
				w.WriteByte(c)
				i++
			}
		}
		if quote != 0 {
			return nil, fmt.Errorf("missing terminating %c", quote)
		}
		words = append(words, w.String())
	}
	return words, nil
}

// kaEscape reads the escape at s[*i] (after its backslash), as
// alloc_strvec_quoted_escaped_common does.
func kaEscape(s string, i *int) byte {
	c := s[*i]
	isHex := func(b byte) bool { return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F' }
	switch {
	case c == 'x' && *i+1 < len(s) && isHex(s[*i+1]):
		*i++
		var v byte
		for n := 0; n < 2 && *i < len(s) && isHex(s[*i]); n++ {
			d := s[*i]
			switch {
			case d <= '9':
				d -= '0'
			case d >= 'a':
				d -= 'a' - 10
			default:
				d -= 'A' - 10
			}
			v = v<<4 | d
			*i++
		}
		return v
	case c == 'c' && *i+1 < len(s):
		*i += 2
		return s[*i-1] & 0x1f
	case c >= '0' && c <= '7':
		v := c - '0'
		*i++
		for n := 0; n < 2 && *i < len(s) && s[*i] >= '0' && s[*i] <= '7'; n++ {
			v = v<<3 + s[*i] - '0'
			*i++
		}
		return v
	}
	*i++
	if e, ok := map[byte]byte{'a': '\a', 'b': '\b', 'E': 0x1b, 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t', 'v': '\v'}[c]; ok {
		return e
	}
	return c
}

// kaScript reads misc_path's rest: the program and its arguments, and the
// words after the first that keepalived ignores.
func kaScript(rest string) (argv, ignored []string, err error) {
	words, err := kaQuotedWords(rest, false)
	if err != nil || len(words) == 0 {
		return nil, nil, cmpErr(err, "no command")
	}
	argv, err = kaQuotedWords(words[0], true)
	if err != nil || len(argv) == 0 {
		return nil, nil, cmpErr(err, "no command")
	}
	for i, a := range argv {
		// keepalived copies each word with strcpy: a \0 ends it.
		argv[i], _, _ = strings.Cut(a, "\x00")
	}
	if argv[0] == "" {
		return nil, nil, errors.New("an empty program")
	}
	return argv, words[1:], nil
}

func cmpErr(err error, msg string) error {
	if err != nil {
		return err
	}
	return errors.New(msg)
}

// kaCommand writes a MISC_CHECK's program and arguments as misc_path reads
// them back (kaScript): one word, or one double-quoted string of words, a
// word with a blank in single quotes; a backslash, a quote, a control
// character or a character keepalived's line reader takes for a comment or
// a brace is written as an escape.
func kaCommand(argv []string) string {
	words := make([]string, len(argv))
	plain := len(argv) == 1
	for i, a := range argv {
		var b strings.Builder
		blank := a == "" || strings.ContainsAny(a, " \t")
		for j := 0; j < len(a); j++ {
			c := a[j]
			switch {
			case c == '\\':
				b.WriteString(`\\`)
			case c == ' ' || c == '\t':
				b.WriteByte(c)
			case c < 0x20 || c == 0x7f || strings.IndexByte("\"'#!{}", c) >= 0:
				fmt.Fprintf(&b, `\x%02x`, c)
			default:
				b.WriteByte(c)
				continue
			}
			plain = false
		}
		words[i] = b.String()
		if blank {
			words[i] = "'" + words[i] + "'"
			plain = false
		}
	}
	if plain {
		return words[0]
	}
	return `"` + strings.Join(words, " ") + `"`
}
