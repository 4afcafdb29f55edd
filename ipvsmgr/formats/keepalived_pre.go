package formats

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
)

// keepalived reads its configuration a line at a time through a
// preprocessor (read_line in lib/parser.c, keepalived 2.4), before any
// keyword is looked at. This file is that preprocessor: it turns the file
// (and the files it includes) into the text keepalived's keyword parser
// sees, with the line each output line comes from.
//
// For each line, comments and leading blanks removed:
//   - `@ID rest` keeps rest only when ID is the configuration id (keepalived's
//     -i, default the host's name up to its first dot); `@^ID rest` only when
//     it is not.
//   - `$NAME=VALUE` (no blank before the =) defines NAME; a VALUE ending in \
//     goes on over the next lines, to one that does not end in \ or a blank
//     line.
//   - `$NAME` (followed by a blank, a comma, a ) or the end of the line) and
//     `${NAME}` are replaced by the definition's value, again and again over
//     what the replacement brings, so that a value may name another
//     definition; an undefined one stays as it is written (a ${NAME} outside
//     quotes is refused: keepalived would take its braces for a block's). A
//     multi-line definition is replaced only at the end of a line: its first
//     line there, its other lines after it. Keepalived defines _PWD (the directory of the
//     file being read), _INSTANCE (the configuration id), _HASH (#), _BANG
//     (!), ${_ENV NAME} (the environment variable) and ${_RANDOM [MIN [MAX]]}
//     (refused: ipvsctl imports one state, keepalived draws a new number each
//     load).
//   - `include GLOB` (and includer, includem...), once the rest is done,
//     reads the files GLOB matches there (keepalived_include.go).
//
// Keepalived 2.4 does not look at a line again once a replacement is made
// (2.2 and 2.3 did): `$C=@main` then `$C priority 1` gives a keyword
// "@main" there, which keepalived does not know: refused here (or passed
// over under --ignore-unknown), as a definition made by a replacement is.
// Its ~SEQ and ~LST line repetitions are refused by their line.

const (
	// kaMaxLine is keepalived's MAXBUF: a longer line after replacement is
	// one keepalived does not finish replacing.
	kaMaxLine = 1024
	// kaMaxReplacements bounds the replacements on one line: keepalived
	// loops for ever on `$A=$A`.
	kaMaxReplacements = 1000
	// kaMaxExpandedLines bounds the lines multi-line definitions produce.
	kaMaxExpandedLines = 100000
)

type kaDef struct {
	name      string
	value     string // lines separated by \n when multiline
	multiline bool
	// std is a definition keepalived makes (_PWD, _INSTANCE...): its value
	// is computed where it is used; params its bounds.
	std                  string
	minParams, maxParams int
	numbersOnly          bool
}

type kaPre struct {
	k        *kaImporter
	configID string
	defs     []*kaDef
	ml       *kaDef // the multi-line definition being read
	out      bytes.Buffer
	lines    []int // the line (with its file's base) of each output line
	// pending are the lines of multi-line definitions still to read, the
	// next one last: a stack, so that a definition's lines go before the
	// others at the cost of their own number (put at the front, they cost
	// a copy of every line still pending: 100,000 expanded lines took 9 s).
	pending  []string
	expanded int
}

func newKaPre(k *kaImporter, configID string) *kaPre {
	p := &kaPre{k: k, configID: configID}
	p.defs = []*kaDef{
		{name: "_PWD", std: "_PWD"},
		{name: "_INSTANCE", std: "_INSTANCE"},
		{name: "_RANDOM", std: "_RANDOM", maxParams: 2, numbersOnly: true},
		{name: "_ENV", std: "_ENV", minParams: 1, maxParams: 1},
		{name: "_HASH", value: "#"},
		{name: "_BANG", value: "!"},
	}
	return p
}

// defaultConfigID is keepalived's default configuration id: the node name
// up to its first dot.
func defaultConfigID() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	name, _, _ := strings.Cut(h, ".")
	return name
}

// emit writes one line of the preprocessed text. A carriage return at its
// end goes, as a file's line loses it when read: one that a multi-line
// definition put there would otherwise come back from a kept block's text
// and be lost on the next read (keepalived reads it as a blank).
func (p *kaPre) emit(s string, ref int) {
	p.out.WriteString(strings.TrimRight(s, "\r"))
	p.out.WriteByte('\n')
	p.lines = append(p.lines, ref)
}

// file preprocesses data, read from path, its lines numbered from base+1.
func (p *kaPre) file(data []byte, path string, base, depth int) error {
	n := 0
	for len(data) > 0 {
		raw := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			raw, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		n++
		ref := base + n
		if err := p.line(strings.TrimRight(string(raw), "\r"), ref, path, depth, true); err != nil {
			return err
		}
		for len(p.pending) > 0 {
			next := p.pending[len(p.pending)-1]
			p.pending = p.pending[:len(p.pending)-1]
			if err := p.line(next, ref, path, depth, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// line preprocesses one line: raw from the file, or (fromFile false) a line
// of a multi-line definition, already without its comments.
func (p *kaPre) line(raw string, ref int, path string, depth int, fromFile bool) error {
	buf := raw
	if fromFile {
		if raw == "" && p.ml != nil {
			p.endDefinition()
		}
		buf = kaDecomment(raw)
		if buf == "" {
			p.emit(raw, ref)
			return nil
		}
	}
	if p.ml != nil {
		cont := strings.HasSuffix(buf, `\`)
		if cont {
			buf = strings.TrimRight(buf[:len(buf)-1], " \t") + "\n"
		}
		if len(buf) >= 2 || buf != "" && !cont {
			p.ml.value += buf
		}
		if !cont {
			p.endDefinition()
		}
		return nil
	}
	if buf == "" {
		return nil
	}
	changed := !fromFile
	if buf[0] == '@' {
		ofs := 1
		if strings.HasPrefix(buf, "@^") {
			ofs = 2
		}
		i := strings.IndexAny(buf[ofs:], " \t")
		if i < 0 {
			return nil
		}
		if (buf[ofs:ofs+i] == p.configID) == (ofs == 2) {
			return nil
		}
		buf = strings.TrimLeft(buf[ofs+i:], " \t")
		changed = true
	}
	if p.definition(buf) {
		return nil
	}
	if strings.HasPrefix(buf, "~SEQ") || strings.HasPrefix(buf, "~LST") {
		return p.k.errf(ref, "%s: keepalived's line repetition is not read by ipvsctl: write the lines out", buf[:4])
	}
	if buf[0] != '~' && strings.IndexByte(buf, '$') >= 0 {
		out, replaced, err := p.replace(buf, ref, path)
		if err != nil {
			return err
		}
		if replaced {
			buf, changed = kaDecomment(out), true
			if strings.HasPrefix(buf, "@") || strings.HasPrefix(buf, "$") && p.isDefinition(buf) {
				// keepalived 2.4 passes it on as a keyword it does not know.
				kw, _, _ := strings.Cut(buf, " ")
				return p.k.unknown(ref, "unknown keyword %q: keepalived 2.4 does not read a line again once a definition is replaced in it (2.2 and 2.3 did)", kw)
			}
		}
	}
	if name := undefinedBraced(buf); name != "" {
		return p.k.errf(ref, "${%s} is not defined: keepalived leaves it as written, and takes its { and } for a block's (define it first: $%s=VALUE)", name, name)
	}
	if isIncludeLine(buf) {
		return p.k.include(p, buf, ref, path, depth)
	}
	if changed {
		// The line's indentation is kept, for the text of a kept block.
		p.emit(raw[:len(raw)-len(strings.TrimLeft(raw, " \t"))]+buf, ref)
	} else {
		p.emit(raw, ref)
	}
	return nil
}

func (p *kaPre) endDefinition() {
	if p.ml.value == "" {
		p.ml.multiline = false
	}
	p.ml = nil
}

func isNameStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

func isNameByte(c byte) bool { return isNameStart(c) || c >= '0' && c <= '9' }

// definition reads `$NAME=VALUE` (check_definition): a new definition, or a
// new value for one (keepalived's own ones included).
func (p *kaPre) definition(buf string) bool {
	if !p.isDefinition(buf) {
		return false
	}
	i := strings.IndexByte(buf, '=')
	value, multiline := strings.TrimLeft(buf[i+1:], " \t"), false
	if strings.HasSuffix(value, `\`) {
		value, multiline = strings.TrimRight(value[:len(value)-1], " \t"), true
		if value != "" {
			value += "\n"
		}
	}
	d := p.find(buf[1:i], true)
	if d == nil {
		d = &kaDef{name: buf[1:i]}
		p.defs = append(p.defs, d)
	}
	*d = kaDef{name: d.name, value: value, multiline: multiline}
	if multiline {
		p.ml = d
	}
	return true
}

// isDefinition is whether buf is `$NAME=...`.
func (p *kaPre) isDefinition(buf string) bool {
	if len(buf) < 2 || buf[0] != '$' || !isNameStart(buf[1]) {
		return false
	}
	for i := 2; i < len(buf); i++ {
		if buf[i] == '=' {
			return true
		}
		if !isNameByte(buf[i]) {
			return false
		}
	}
	return false
}

func (p *kaPre) find(name string, multilineToo bool) *kaDef {
	for _, d := range p.defs {
		if d.name == name && (multilineToo || !d.multiline) {
			return d
		}
	}
	return nil
}

// replace makes the replacements of one line (replace_param).
func (p *kaPre) replace(line string, ref int, path string) (string, bool, error) {
	pos, found, n := 0, false, 0
	for {
		i := strings.IndexByte(line[pos:], '$')
		if i < 0 {
			break
		}
		cur := pos + i
		if cur+1 >= len(line) {
			break
		}
		d, length, params, err := p.reference(line[cur+1:], ref)
		if err != nil {
			return "", false, err
		}
		if d == nil {
			pos = cur + 1
			continue
		}
		if n++; n > kaMaxReplacements {
			return "", false, p.k.errf(ref, "$%s: more than %d replacements on one line (a definition that names itself?)", d.name, kaMaxReplacements)
		}
		value, err := p.value(d, params, ref, path)
		if err != nil {
			return "", false, err
		}
		if d.multiline {
			first, rest, _ := strings.Cut(value, "\n")
			if rest != "" || strings.HasSuffix(value, "\n") {
				more := strings.Split(rest, "\n")
				if p.expanded += len(more); p.expanded > kaMaxExpandedLines {
					return "", false, p.k.errf(ref, "$%s: multi-line definitions make more than %d lines", d.name, kaMaxExpandedLines)
				}
				for i := len(more) - 1; i >= 0; i-- {
					p.pending = append(p.pending, more[i])
				}
			}
			value = first
		}
		line = line[:cur] + value + line[cur+1+length:]
		found = true
		if len(line) >= kaMaxLine {
			return "", false, p.k.errf(ref, "$%s: the line grows past keepalived's %d bytes (%q...)", d.name, kaMaxLine-1, line[:40])
		}
		if strings.HasPrefix(strings.TrimLeft(value, " \t"), "~") {
			break
		}
		pos = cur
	}
	return line, found, nil
}

// reference reads a reference after its $ (find_definition): the
// definition it names, how long it is, and its parameters; nil when it names
// none (it stays as written).
func (p *kaPre) reference(s string, ref int) (*kaDef, int, []string, error) {
	braces := s[0] == '{'
	rest := s
	if braces {
		rest = s[1:]
	}
	if rest == "" || !isNameStart(rest[0]) {
		return nil, 0, nil, nil
	}
	n := 1
	for n < len(rest) && isNameByte(rest[n]) {
		n++
	}
	name, after := rest[:n], rest[n:]
	length := n
	var params []string
	if braces {
		j := 0
		for j < len(after) && (after[j] == ' ' || after[j] == '\t' || isNameByte(after[j])) {
			j++
		}
		text := after[:j]
		params = strings.Fields(text)
		if len(params) > 0 && strings.TrimRight(text, " \t") != text {
			return nil, 0, nil, nil
		}
		if j == len(after) || after[j] != '}' {
			return nil, 0, nil, nil
		}
		after = after[j+1:]
		length = 1 + n + j + 1
	} else if after != "" && !strings.ContainsRune(" \t,)", rune(after[0])) {
		return nil, 0, nil, nil
	}
	d := p.find(name, after == "")
	if d == nil {
		return nil, 0, nil, nil
	}
	if len(params) > 0 {
		if d.maxParams == 0 {
			return nil, 0, nil, nil
		}
		if d.numbersOnly && strings.Trim(strings.Join(params, ""), "0123456789") != "" {
			return nil, 0, nil, p.k.errf(ref, "Definition %s requires numeric parameters only.", d.name)
		}
		if len(params) > d.maxParams || len(params) < d.minParams {
			return nil, 0, nil, p.k.errf(ref, "Definition %s requires between %d and %d parameters, %d specified.", d.name, d.minParams, d.maxParams, len(params))
		}
	}
	return d, length, params, nil
}

// value is what a reference to d is replaced by, on a line of path.
func (p *kaPre) value(d *kaDef, params []string, ref int, path string) (string, error) {
	switch d.std {
	case "_PWD":
		if path == "" {
			return "", p.k.errf(ref, "${_PWD}: the directory of the file is not known here (import the file by its path: ipvsctl import --format keepalived FILE)")
		}
		dir, err := filepath.Abs(filepath.Dir(path))
		if err != nil {
			return "", p.k.errf(ref, "${_PWD}: %v", err)
		}
		return dir, nil
	case "_INSTANCE":
		return p.configID, nil
	case "_RANDOM":
		return "", p.k.errf(ref, "${_RANDOM}: keepalived draws a new number at each load, ipvsctl imports one state: write the number")
	case "_ENV":
		if len(params) == 0 {
			return "", p.k.errf(ref, "${_ENV}: want ${_ENV NAME}")
		}
		return os.Getenv(params[0]), nil
	}
	return d.value, nil
}

// kaDecomment is keepalived's decomment(): leading and trailing blanks and
// what follows a # or ! outside quotes removed, \# and \! unescaped, a final
// \ kept.
func kaDecomment(s string) string {
	s = strings.TrimLeft(s, " \t")
	var b strings.Builder
	quote, cont := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' {
			quote = !quote
		} else if c == '\\' {
			if i+1 < len(s) {
				if !quote && (s[i+1] == '#' || s[i+1] == '!') {
					b.WriteByte(s[i+1])
				} else {
					b.WriteByte(c)
					b.WriteByte(s[i+1])
				}
				i++
				continue
			}
			cont = true
			break
		} else if !quote && (c == '#' || c == '!') {
			break
		}
		b.WriteByte(c)
	}
	out := strings.TrimRight(b.String(), " \t")
	if cont {
		out += `\`
	}
	return out
}

// isIncludeLine is keepalived's is_include: include, or include followed by
// one of r m w b a, then a blank.
func isIncludeLine(buf string) bool {
	if !strings.HasPrefix(buf, "include") || len(buf) < 8 {
		return false
	}
	if isBlankByte(buf[7]) {
		return true
	}
	return len(buf) > 8 && isBlankByte(buf[8]) && strings.IndexByte("rmwba", buf[7]) >= 0
}

func isBlankByte(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// undefinedBraced is the name of a ${NAME} reference left in buf outside
// quotes (keepalived splits a line at its first brace outside quotes).
func undefinedBraced(buf string) string {
	quote := false
	for i := 0; i < len(buf); i++ {
		switch {
		case buf[i] == '"':
			quote = !quote
		case !quote && buf[i] == '$' && i+2 < len(buf) && buf[i+1] == '{' && isNameStart(buf[i+2]):
			n := i + 3
			for n < len(buf) && isNameByte(buf[n]) {
				n++
			}
			if n < len(buf) && buf[n] == '}' {
				return buf[i+2 : n]
			}
		}
	}
	return ""
}
