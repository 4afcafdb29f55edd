package formats

import (
	"bytes"
	"path/filepath"
	"strings"
)

// include FILE (and includer, includem, includew, includeb, includea), as
// keepalived's lib/parser.c reads it: anywhere a statement can be, a glob
// (with {a,b} braces), a relative path resolved from the directory of the
// file that holds the include. A plain include that matches nothing is only
// noted (keepalived logs "No config files matched"); includer and the
// others are strict.

const (
	maxIncludeDepth = 16
	maxIncludeFiles = 1000
)

func isInclude(kw string) bool {
	return kw == "include" || len(kw) == 8 && strings.HasPrefix(kw, "include") && strings.ContainsRune("rmwba", rune(kw[7]))
}

// includes replaces each include statement of nodes (at any depth) by the
// nodes of the files it names; path is the file nodes come from.
func (k *kaImporter) includes(nodes []*kaNode, path string, depth int) ([]*kaNode, error) {
	var out []*kaNode
	for _, n := range nodes {
		if n.block {
			var err error
			if n.children, err = k.includes(n.children, path, depth); err != nil {
				return nil, err
			}
		}
		if !isInclude(n.word(0)) || n.block {
			out = append(out, n)
			continue
		}
		sub, err := k.include(n, path, depth)
		if err != nil {
			return nil, err
		}
		out = append(out, sub...)
	}
	return out, nil
}

func (k *kaImporter) include(n *kaNode, path string, depth int) ([]*kaNode, error) {
	pattern := strings.Join(wordTexts(n.words[1:]), " ")
	if pattern == "" {
		return nil, k.errf(n.line, "%s: want a file name or a glob", n.word(0))
	}
	if k.opts.ReadFile == nil {
		return nil, k.errf(n.line, "%s %s: included files are read only where they are: run `ipvsctl import --format keepalived FILE` on the machine that has them", n.word(0), pattern)
	}
	if depth >= maxIncludeDepth {
		return nil, k.errf(n.line, "%s %s: includes nested deeper than %d", n.word(0), pattern, maxIncludeDepth)
	}
	if !filepath.IsAbs(pattern) {
		pattern = filepath.Join(filepath.Dir(path), pattern)
	}
	var names []string
	for _, p := range expandBraces(pattern) {
		m := []string{p}
		if k.opts.Glob != nil {
			var err error
			if m, err = k.opts.Glob(p); err != nil {
				return nil, k.errf(n.line, "%s %s: %v", n.word(0), p, err)
			}
		}
		names = append(names, m...)
	}
	if len(names) == 0 {
		if n.word(0) == "include" {
			k.warnf(n.line, "No config files matched '%s'.", pattern)
			return nil, nil
		}
		return nil, k.errf(n.line, "%s - no matching file", pattern)
	}
	var out []*kaNode
	for _, name := range names {
		if len(k.files) >= maxIncludeFiles {
			return nil, k.errf(n.line, "%s: more than %d included files", n.word(0), maxIncludeFiles)
		}
		data, err := k.opts.ReadFile(name)
		if err != nil {
			return nil, k.errf(n.line, "Configuration file '%s' open problem (%v)", name, err)
		}
		base := len(k.files) << fileShift
		k.files = append(k.files, name)
		sub, err := parseKeepalivedTree(bytes.ToValidUTF8(data, []byte("\uFFFD")), base)
		if err != nil {
			return nil, err
		}
		if sub, err = k.includes(sub, name, depth+1); err != nil {
			return nil, err
		}
		out = append(out, sub...)
	}
	return out, nil
}

// expandBraces expands glob braces as GLOB_BRACE does: a{b,c}d is abd acd.
func expandBraces(p string) []string {
	open := strings.IndexByte(p, '{')
	if open < 0 {
		return []string{p}
	}
	depth, closing := 0, -1
	var parts []string
	last := open + 1
	for i := open; i < len(p) && closing < 0; i++ {
		switch p[i] {
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				parts = append(parts, p[last:i])
				closing = i
			}
		case ',':
			if depth == 1 {
				parts = append(parts, p[last:i])
				last = i + 1
			}
		}
	}
	if closing < 0 {
		return []string{p}
	}
	var out []string
	for _, part := range parts {
		for _, rest := range expandBraces(p[closing+1:]) {
			out = append(out, expandBraces(p[:open]+part+rest)...)
		}
	}
	return out
}
