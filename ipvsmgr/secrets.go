package ipvsmgr

import (
	"strings"
	"unicode"
)

// Secrets never live in the document: every viewer reads it (the state,
// the history, the drafts, the export) and every old revision keeps it.
// A key the directors need is in a file the document names (the VRRP keys,
// a BGP peer's password_file). What an import kept of another tool's
// configuration (Imported) is scrubbed as it enters: the argument of each
// secret keyword becomes SecretNotKept.

// SecretNotKept stands for a secret an import read and did not keep.
const SecretNotKept = "<secret-not-kept>"

// secretWords are the keywords of the formats imported (keepalived,
// lvs.cf, ipvsadm) and of their neighbours (ldirectord) whose argument is
// a secret: keepalived's VRRP PASS authentication and its SSL key's
// password, ldirectord's login passwords and RADIUS secret.
var secretWords = map[string]bool{
	"auth_pass": true, "password": true, "passwd": true, "secret": true,
}

// ScrubImported replaces in place each secret an import kept in keys
// (SecretNotKept in its stead), and reports how many it replaced.
func ScrubImported(keys []ImportedKey) int {
	n := 0
	for i := range keys {
		k := &keys[i]
		if isSecretWord(k.Key) && k.Value != "" && k.Value != SecretNotKept {
			k.Value = SecretNotKept
			n++
			continue
		}
		var c int
		k.Value, c = scrubText(k.Value)
		n += c
	}
	return n
}

func isSecretWord(w string) bool { return secretWords[strings.ToLower(w)] }

// scrubText replaces, in a kept block's text, the word after each secret
// keyword; and in keepalived 2.4's auth_hmac "key ID SECRET" the key
// given inline (one in a file, "file:PATH", is kept).
func scrubText(s string) (string, int) {
	if s == "" {
		return s, 0
	}
	type word struct{ start, end int }
	var ws []word
	for i := 0; i < len(s); {
		r := rune(s[i])
		switch {
		case unicode.IsSpace(r):
			i++
		case r == '{' || r == '}':
			ws = append(ws, word{i, i + 1})
			i++
		case r == '"':
			j := strings.IndexByte(s[i+1:], '"')
			end := len(s)
			if j >= 0 {
				end = i + 1 + j + 1
			}
			ws = append(ws, word{i, end})
			i = end
		default:
			j := i
			for j < len(s) && !unicode.IsSpace(rune(s[j])) && s[j] != '{' && s[j] != '}' {
				j++
			}
			ws = append(ws, word{i, j})
			i = j
		}
	}
	text := func(w word) string { return s[w.start:w.end] }
	var secret []word
	for i, w := range ws {
		switch t := strings.ToLower(text(w)); {
		case isSecretWord(t) && i+1 < len(ws):
			secret = append(secret, ws[i+1])
		case t == "key" && i+2 < len(ws) && isNumber(text(ws[i+1])) && !strings.HasPrefix(text(ws[i+2]), "file:"):
			secret = append(secret, ws[i+2])
		}
	}
	n := 0
	var b strings.Builder
	last := 0
	for _, w := range secret {
		v := text(w)
		if v == "{" || v == "}" || v == SecretNotKept {
			continue
		}
		b.WriteString(s[last:w.start])
		b.WriteString(SecretNotKept)
		last = w.end
		n++
	}
	if n == 0 {
		return s, 0
	}
	b.WriteString(s[last:])
	return b.String(), n
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
