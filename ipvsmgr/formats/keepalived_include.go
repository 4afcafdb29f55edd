package formats

import (
	"bytes"
	"path/filepath"
	"strings"
)

// include FILE (and includer, includem, includew, includeb, includea), as
// keepalived's lib/parser.c reads it: anywhere a statement can be, a glob
// (with {a,b} braces), a relative path resolved from the directory of the
// file that holds the include (keepalived reads each file from its own
// directory). A plain include that matches nothing is only
// noted (keepalived logs "No config files matched"); includer and the
// others are strict.

const (
	maxIncludeDepth = 16
	maxIncludeFiles = 1000
)

// include reads the files an include line names (buf, after the
// preprocessor), in place, through p; path is the file that holds it.
func (k *kaImporter) include(p *kaPre, buf string, ref int, path string, depth int) error {
	// "include" and a blank, or "includer" (...) and a blank (isIncludeLine).
	kw, pattern := buf[:7], buf[8:]
	if !isBlankByte(buf[7]) {
		kw, pattern = buf[:8], buf[9:]
	}
	pattern = strings.TrimLeft(pattern, " \t")
	if pattern == "" {
		return k.errf(ref, "%s: want a file name or a glob", kw)
	}
	if k.opts.ReadFile == nil {
		return k.errf(ref, "%s %s: included files are read only where they are: run `ipvsctl import --format keepalived FILE` on the machine that has them", kw, pattern)
	}
	if depth >= maxIncludeDepth {
		return k.errf(ref, "%s %s: includes nested deeper than %d", kw, pattern, maxIncludeDepth)
	}
	if !filepath.IsAbs(pattern) {
		pattern = filepath.Join(filepath.Dir(path), pattern)
	}
	var names []string
	for _, g := range expandBraces(pattern) {
		m := []string{g}
		if k.opts.Glob != nil {
			var err error
			if m, err = k.opts.Glob(g); err != nil {
				return k.errf(ref, "%s %s: %v", kw, g, err)
			}
		}
		names = append(names, m...)
	}
	if len(names) == 0 {
		if kw == "include" {
			k.warnf(ref, "No config files matched '%s'.", pattern)
			return nil
		}
		return k.errf(ref, "%s - no matching file", pattern)
	}
	for _, name := range names {
		if len(k.files) >= maxIncludeFiles {
			return k.errf(ref, "%s: more than %d included files", kw, maxIncludeFiles)
		}
		data, err := k.opts.ReadFile(name)
		if err != nil {
			return k.errf(ref, "Configuration file '%s' open problem (%v)", name, err)
		}
		base := len(k.files) << fileShift
		k.files = append(k.files, name)
		if err := p.file(bytes.ToValidUTF8(data, []byte("\uFFFD")), name, base, depth+1); err != nil {
			return err
		}
	}
	return nil
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
