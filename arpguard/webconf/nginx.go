// Package webconf reads the web server that answers on a real server,
// nginx or HAProxy, from its own dump of its configuration, and holds it
// against the rules of the servers' manuals: each finding names the
// directive's manual entry and the file and line it came from.
package webconf

import (
	"fmt"
	"path"
	"strings"
)

// Directive is one nginx directive (or HAProxy keyword line) where it was
// written; a block directive (events, http, server...) holds its children.
type Directive struct {
	Name  string
	Args  []string
	File  string
	Line  int
	Block []*Directive
}

// Where is "file:line".
func (d *Directive) Where() string { return fmt.Sprintf("%s:%d", d.File, d.Line) }

// File is one configuration file of a dump.
type File struct {
	Path string
	Text string
}

// nginxFileHeader starts each file in the output of `nginx -T`.
const nginxFileHeader = "# configuration file "

// SplitNginxDump cuts the output of `nginx -T` into its files, the main
// configuration first. Lines before the first file (nginx's own "syntax is
// ok" when stderr is mixed in) are not part of any.
func SplitNginxDump(out string) ([]File, error) {
	var files []File
	var cur *File
	var b strings.Builder
	flush := func() {
		if cur != nil {
			cur.Text = b.String()
			files = append(files, *cur)
		}
		b.Reset()
	}
	for line := range strings.Lines(out) {
		t := strings.TrimRight(line, "\r\n")
		if strings.HasPrefix(t, nginxFileHeader) && strings.HasSuffix(t, ":") {
			flush()
			cur = &File{Path: strings.TrimSuffix(strings.TrimPrefix(t, nginxFileHeader), ":")}
			continue
		}
		if cur != nil {
			b.WriteString(line)
		}
	}
	flush()
	if len(files) == 0 {
		return nil, fmt.Errorf("nginx -T: no %q section in its output", strings.TrimSpace(nginxFileHeader))
	}
	// nginx -T ends each file with an empty line of its own.
	for i := range files {
		files[i].Text = strings.TrimSuffix(files[i].Text, "\n")
	}
	return files, nil
}

// ParseNginx parses the files of a dump into the main configuration's
// directives, with each include replaced by the directives of the files it
// names (nginx -T prints every included file once, in the order read).
func ParseNginx(files []File) ([]*Directive, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("nginx configuration: no files")
	}
	parsed := map[string][]*Directive{}
	for _, f := range files {
		ds, err := parseNginxFile(f)
		if err != nil {
			return nil, err
		}
		parsed[f.Path] = ds
	}
	prefix := path.Dir(files[0].Path)
	var expand func(ds []*Directive, depth int) ([]*Directive, error)
	expand = func(ds []*Directive, depth int) ([]*Directive, error) {
		if depth > 16 {
			return nil, fmt.Errorf("nginx configuration: includes nested deeper than 16")
		}
		var out []*Directive
		for _, d := range ds {
			if d.Name == "include" && len(d.Args) == 1 && d.Block == nil {
				pat := d.Args[0]
				if !path.IsAbs(pat) {
					pat = path.Join(prefix, pat)
				}
				for _, f := range files[1:] {
					if ok, _ := path.Match(pat, f.Path); ok || f.Path == pat {
						sub, err := expand(parsed[f.Path], depth+1)
						if err != nil {
							return nil, err
						}
						out = append(out, sub...)
					}
				}
				out = append(out, d) // kept: where a drop-in directory is included
				continue
			}
			if d.Block != nil {
				b, err := expand(d.Block, depth)
				if err != nil {
					return nil, err
				}
				d.Block = b
			}
			out = append(out, d)
		}
		return out, nil
	}
	return expand(parsed[files[0].Path], 0)
}

// parseNginxFile tokenizes one file as nginx does: words, quoted strings,
// ';', '{', '}' and '#' comments to the end of the line.
func parseNginxFile(f File) ([]*Directive, error) {
	type frame struct{ list *[]*Directive }
	var top []*Directive
	stack := []frame{{&top}}
	var words []string
	wordLine := 0
	line := 1
	s := f.Text
	errf := func(format string, a ...any) error {
		return fmt.Errorf("nginx configuration %s:%d: %s", f.Path, line, fmt.Sprintf(format, a...))
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == ';' || c == '{':
			if len(words) == 0 {
				return nil, errf("unexpected %q", c)
			}
			d := &Directive{Name: words[0], Args: words[1:], File: f.Path, Line: wordLine}
			list := stack[len(stack)-1].list
			*list = append(*list, d)
			if c == '{' {
				d.Block = []*Directive{}
				stack = append(stack, frame{&d.Block})
			}
			words = nil
			i++
		case c == '}':
			if len(words) > 0 || len(stack) == 1 {
				return nil, errf("unexpected }")
			}
			stack = stack[:len(stack)-1]
			i++
		case c == '"' || c == '\'':
			j := i + 1
			var w strings.Builder
			for ; j < len(s) && s[j] != c; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				if s[j] == '\n' {
					line++
				}
				w.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, errf("unterminated string")
			}
			if len(words) == 0 {
				wordLine = line
			}
			words = append(words, w.String())
			i = j + 1
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\r\n;{}#\"'", rune(s[j])) {
				j++
			}
			// '{' inside a word (a variable ${name}) belongs to it.
			for j < len(s) && s[j] == '{' && j > i && s[j-1] == '$' {
				k := strings.IndexByte(s[j:], '}')
				if k < 0 {
					break
				}
				j += k + 1
				for j < len(s) && !strings.ContainsRune(" \t\r\n;{}#\"'", rune(s[j])) {
					j++
				}
			}
			if len(words) == 0 {
				wordLine = line
			}
			words = append(words, s[i:j])
			i = j
		}
	}
	if len(words) > 0 {
		return nil, errf("directive %q has no ending ';'", words[0])
	}
	if len(stack) != 1 {
		return nil, errf("unexpected end of file, expecting }")
	}
	return top, nil
}

// Find is the first directive named name among ds (nil: none).
func Find(ds []*Directive, name string) *Directive {
	for _, d := range ds {
		if d.Name == name {
			return d
		}
	}
	return nil
}

// Walk calls fn on every directive in ds and their blocks, with the names
// of the blocks it is in (outermost first).
func Walk(ds []*Directive, fn func(d *Directive, in []string)) {
	var walk func(ds []*Directive, in []string)
	walk = func(ds []*Directive, in []string) {
		for _, d := range ds {
			fn(d, in)
			if d.Block != nil {
				walk(d.Block, append(in[:len(in):len(in)], d.Name))
			}
		}
	}
	walk(ds, nil)
}
