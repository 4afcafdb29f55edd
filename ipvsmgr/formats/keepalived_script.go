package formats

import (
	"errors"
	"fmt"
	"strings"
)

// A MISC_CHECK's misc_path and a quorum_up/quorum_down program are read as
// keepalived reads them (set_script_params_array, lib/notify.c): the line
// split into words, quotes removed; the first word after the keyword, alone,
// is the command line, split again with quotes and escapes
// (alloc_strvec_quoted_escaped): \a \b \E \f \n \r \t \v, \xHH, \OOO, \cX,
// else the character itself. A backslash escapes inside single quotes too.
// keepalived 2.3.2 changed the first split (commit af7aa8bf): since then
// it keeps a backslash with the character after it (alloc_strvec_quoted);
// before, as in Debian's 2.2.7, it read the escapes there too, so that
// "\\" was one backslash by the second split, and \x took every hex digit
// after it. The import reads as 2.3.2 and later do and warns where the
// earlier ones read a line otherwise (kaImporter.script); the export writes
// only what both read alike (kaCommand).

const kaWhite = " \t\f\n\r\v"

// kaQuotedWords is alloc_strvec_quoted_escaped_common (lib/parser.c);
// legacy, keepalived's before 2.3.2 (kaEscape). As there, a quote left
// open is an error only when text follows it (or the escape after it) to
// the end: one opened as the string ends is passed over (`'a'b'` is ab).
func kaQuotedWords(s string, escapes, legacy bool) ([]string, error) {
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
		quotedText := false // text read in the open quote since it opened or since an escape
	word:
		for i < len(s) {
			c := s[i]
			switch {
			case c == '\\':
				i++
				if i == len(s) {
					return nil, errors.New("a backslash ends it (missing escape char at end)")
				}
				quotedText = false
				if !escapes {
					w.WriteByte('\\')
					w.WriteByte(s[i])
					i++
					continue
				}
				w.WriteByte(kaEscape(s, &i, legacy))
			case quote != 0 && c == quote:
				quote = 0
				i++
			case quote != 0:
				w.WriteByte(c)
				i++
				quotedText = true
			case c == '"' || c == '\'':
				quote, quotedText = c, false
				i++
			case strings.IndexByte(kaWhite, c) >= 0:
				break word
			default:
				w.WriteByte(c)
				i++
			}
		}
		if quote != 0 && quotedText {
			return nil, fmt.Errorf("missing terminating %c", quote)
		}
		words = append(words, w.String())
	}
	return words, nil
}

// kaEscape reads the escape at s[*i] (after its backslash), as
// alloc_strvec_quoted_escaped_common does; legacy, \x takes every hex
// digit after it (its low 8 bits), as before keepalived 2.3.2.
func kaEscape(s string, i *int, legacy bool) byte {
	c := s[*i]
	isHex := func(b byte) bool { return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F' }
	switch {
	case c == 'x' && *i+1 < len(s) && isHex(s[*i+1]):
		*i++
		var v byte
		for n := 0; (legacy || n < 2) && *i < len(s) && isHex(s[*i]); n++ {
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

// kaScript reads a misc_path's or a notify script's rest as keepalived
// 2.3.2 and later do: the program and its arguments, and the words after
// the first (which misc_path ignores, and which name a user for a notify
// script).
func kaScript(rest string) (argv, after []string, err error) { return kaScriptAs(rest, false) }

// kaScriptLegacy reads it as keepalived before 2.3.2 does.
func kaScriptLegacy(rest string) (argv, after []string, err error) { return kaScriptAs(rest, true) }

func kaScriptAs(rest string, legacy bool) (argv, after []string, err error) {
	if err := kaLineQuotes(rest); err != nil {
		return nil, nil, err
	}
	words, err := kaQuotedWords(rest, legacy, legacy)
	if err != nil || len(words) == 0 {
		return nil, nil, cmpErr(err, "no command")
	}
	argv, err = kaQuotedWords(words[0], true, legacy)
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

// kaLineQuotes is decomment's check (lib/parser.c) of a line's double
// quotes, a backslash taking the character after it: keepalived reports an
// unterminated one.
func kaLineQuotes(s string) error {
	open := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			open = !open
		case '\\':
			i++
		}
	}
	if open {
		return errors.New("unterminated quote")
	}
	return nil
}

func cmpErr(err error, msg string) error {
	if err != nil {
		return err
	}
	return errors.New(msg)
}

// kaCommand writes a program and its arguments as a misc_path or a
// quorum_up/quorum_down command line that keepalived reads back the same
// before and after 2.3.2 (kaScript, kaScriptLegacy): one word, or one
// double-quoted string of words, a word with a blank in single quotes; a
// control character or a character keepalived's line reader takes for a
// comment or a brace as an octal escape (\x would take a hex digit after it
// before 2.3.2). No backslash else: a word with a quote or a backslash
// cannot be written so (one keepalived reads it one way, the other
// another), and ok is false.
func kaCommand(argv []string) (text string, ok bool) {
	words := make([]string, len(argv))
	plain := len(argv) == 1
	for i, a := range argv {
		if strings.ContainsAny(a, "'\"\\") {
			return "", false
		}
		var b strings.Builder
		blank := a == "" || strings.ContainsAny(a, kaWhite)
		for j := 0; j < len(a); j++ {
			c := a[j]
			switch {
			case c == ' ' || c == '\t':
				b.WriteByte(c)
			case c < 0x20 || c == 0x7f || strings.IndexByte("#!{}", c) >= 0:
				fmt.Fprintf(&b, `\%03o`, c)
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
		return words[0], true
	}
	return `"` + strings.Join(words, " ") + `"`, true
}
