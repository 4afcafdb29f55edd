package formats

import (
	"bytes"
	"fmt"
	"strings"
)

// keepalived.conf syntax: words separated by blanks, `{` `}` blocks (the
// brace on the header's line or the next one), `#` and `!` comments,
// "quoted strings". This file only builds the tree; keepalived.go maps it.

const maxNesting = 32

type kaToken struct {
	kind       byte // 'w' word, '{', '}', '\n', 0 at the end
	text       string
	line       int
	start, end int // byte offsets of the token in the input
}

// kaNode is a statement, or a block when block is set.
type kaNode struct {
	words    []kaToken
	line     int
	block    bool
	children []*kaNode
	// start is the offset of the header's line, end the end of its last
	// word or closing brace: the node's text, for keeping it verbatim.
	start, end int
	src        []byte // the file the node is in
}

func (n *kaNode) word(i int) string {
	if i < len(n.words) {
		return n.words[i].text
	}
	return ""
}

func (n *kaNode) header() string {
	parts := make([]string, len(n.words))
	for i, w := range n.words {
		parts[i] = w.text
	}
	return strings.Join(parts, " ")
}

// rest is what follows the keyword, as written (quotes included).
func (n *kaNode) rest() string {
	if len(n.words) < 2 {
		return ""
	}
	return string(n.src[n.words[1].start:n.words[len(n.words)-1].end])
}

// text is the node as written, its indentation removed.
func (n *kaNode) text() string {
	return dedent(string(n.src[n.start:n.end]))
}

func dedent(s string) string {
	lines := strings.Split(s, "\n")
	indent := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, " \t"))
		if indent < 0 || n < indent {
			indent = n
		}
	}
	for i, l := range lines {
		if len(l) >= indent && strings.TrimSpace(l[:max(indent, 0)]) == "" {
			lines[i] = l[max(indent, 0):]
		} else {
			lines[i] = strings.TrimLeft(l, " \t")
		}
	}
	return strings.Join(lines, "\n")
}

type kaLexer struct {
	data []byte
	pos  int
	line int
	// lines maps the data's lines (the preprocessor's output) to the lines
	// they come from.
	lines []int
}

// ref is the line (with its file's base) output line i comes from.
func (lx *kaLexer) ref(i int) int {
	switch {
	case i >= 1 && i <= len(lx.lines):
		return lx.lines[i-1]
	case len(lx.lines) > 0:
		return lx.lines[len(lx.lines)-1]
	}
	return i
}

func (lx *kaLexer) errf(line int, format string, args ...any) error {
	return &ParseError{Format: FormatKeepalived, Line: line, Msg: fmt.Sprintf(format, args...)}
}

func (lx *kaLexer) next() (kaToken, error) {
	for lx.pos < len(lx.data) {
		c := lx.data[lx.pos]
		switch {
		case c == '\n':
			lx.pos++
			lx.line++
			return kaToken{kind: '\n', line: lx.ref(lx.line - 1), start: lx.pos - 1, end: lx.pos}, nil
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			lx.pos++
		case c == '#' || c == '!':
			for lx.pos < len(lx.data) && lx.data[lx.pos] != '\n' {
				lx.pos++
			}
		case c == '{' || c == '}':
			lx.pos++
			return kaToken{kind: c, text: string(c), line: lx.ref(lx.line), start: lx.pos - 1, end: lx.pos}, nil
		case c == '"':
			start := lx.pos
			end := bytes.IndexAny(lx.data[start+1:], "\"\n")
			if end < 0 || lx.data[start+1+end] != '"' {
				return kaToken{}, lx.errf(lx.ref(lx.line), "unterminated quoted string")
			}
			lx.pos = start + 1 + end + 1
			return kaToken{kind: 'w', text: string(lx.data[start+1 : start+1+end]), line: lx.ref(lx.line), start: start, end: lx.pos}, nil
		default:
			start := lx.pos
			for lx.pos < len(lx.data) && !strings.ContainsRune(" \t\r\f\v\n{}\"", rune(lx.data[lx.pos])) {
				lx.pos++
			}
			return kaToken{kind: 'w', text: string(lx.data[start:lx.pos]), line: lx.ref(lx.line), start: start, end: lx.pos}, nil
		}
	}
	return kaToken{line: lx.ref(lx.line)}, nil
}

type kaParser struct {
	lx     *kaLexer
	peeked []kaToken
}

func (p *kaParser) next() (kaToken, error) {
	if n := len(p.peeked); n > 0 {
		t := p.peeked[n-1]
		p.peeked = p.peeked[:n-1]
		return t, nil
	}
	return p.lx.next()
}

func (p *kaParser) unread(t kaToken) { p.peeked = append(p.peeked, t) }

// parseKeepalivedTree reads the preprocessed text into its top-level nodes;
// lines maps its lines to theirs (nil: numbered from 1).
// movedToLineStart is whether n, a statement that does not start its line,
// would be read otherwise once written at a line's start, where alone
// keepalived's preprocessor looks: a conditional (@id, @^id), a definition
// ($NAME=...), a line repetition (~SEQ, ~LST) or an include. Where it
// stands, keepalived takes its first word for an unknown keyword.
func (n *kaNode) movedToLineStart() bool {
	if n.start == lineStart(n.src, n.start) || len(n.words) == 0 {
		return false
	}
	text := string(n.src[n.start:n.end])
	return strings.HasPrefix(text, "@") || (*kaPre)(nil).isDefinition(text) ||
		strings.HasPrefix(text, "~SEQ") || strings.HasPrefix(text, "~LST") || isIncludeLine(text)
}

func parseKeepalivedTree(data []byte, lines []int) ([]*kaNode, error) {
	p := &kaParser{lx: &kaLexer{data: data, line: 1, lines: lines}}
	return p.block(nil, 0)
}

func lineStart(data []byte, off int) int {
	return bytes.LastIndexByte(data[:off], '\n') + 1
}

// block reads nodes up to the } that closes parent (or the end of the file
// at the top level).
func (p *kaParser) block(parent *kaNode, depth int) ([]*kaNode, error) {
	if depth > maxNesting {
		return nil, p.lx.errf(parent.line, "blocks nested deeper than %d", maxNesting)
	}
	var nodes []*kaNode
	for {
		t, err := p.next()
		if err != nil {
			return nil, err
		}
		switch t.kind {
		case '\n':
			continue
		case 0:
			if parent != nil {
				return nil, p.lx.errf(parent.line, "%s: block is not closed (missing })", parent.header())
			}
			return nodes, nil
		case '}':
			if parent == nil {
				return nil, p.lx.errf(t.line, "} closes no block")
			}
			parent.end = t.end
			return nodes, nil
		case '{':
			return nil, p.lx.errf(t.line, "{ opens a block with no keyword before it")
		}
		n := &kaNode{line: t.line, start: lineStart(p.lx.data, t.start), src: p.lx.data}
		if len(bytes.Trim(p.lx.data[n.start:t.start], " \t\r\f\v")) > 0 {
			// Not the first thing on its line (`real_server A { TCP_CHECK
			// {...} }`): its text starts at its keyword.
			n.start = t.start
		}
		for t.kind == 'w' {
			n.words = append(n.words, t)
			if t, err = p.next(); err != nil {
				return nil, err
			}
		}
		n.end = n.words[len(n.words)-1].end
		if t.kind == '\n' {
			// The brace may be on the next line.
			for t.kind == '\n' {
				if t, err = p.next(); err != nil {
					return nil, err
				}
			}
			if t.kind != '{' {
				p.unread(t)
				t.kind = '\n'
			}
		}
		switch t.kind {
		case '{':
			n.block = true
			if n.children, err = p.block(n, depth+1); err != nil {
				return nil, err
			}
		case '}', 0:
			p.unread(t)
		}
		nodes = append(nodes, n)
	}
}
