// Package doclinks holds the test that the documentation's relative links
// resolve: every Markdown file in the repository's root and under docs/, each
// link or image to a file that exists, and each #anchor to a heading of the
// Markdown file it names; and that README.md stays a door: short, with a map
// naming every folder that holds Go code.
package doclinks

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
)

func TestRelativeLinksResolve(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files, err := markdownFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("found %d Markdown files under %s: want README.md and the docs/ pages", len(files), root)
	}
	links := 0
	for _, f := range files {
		broken, n, err := checkFile(f)
		if err != nil {
			t.Fatal(err)
		}
		links += n
		rel, _ := filepath.Rel(root, f)
		for _, b := range broken {
			t.Errorf("%s: %s", rel, b)
		}
	}
	t.Logf("%d Markdown files, %d relative links checked", len(files), links)
}

// TestBrokenLinksAreFound: the checker itself refuses a missing file, a missing
// anchor in another file and in the same file, and takes what resolves.
func TestBrokenLinksAreFound(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("docs/b.md", "# B\n\n## The daemon: `ipvsctl serve`\n\n## At 1,000 x 10\n\n## At 1,000 x 10\n")
	write("docs/pic.png", "")
	a := write("docs/a.md", strings.Join([]string{
		"# A", "## Here",
		"[ok](b.md) [ok](b.md#the-daemon-ipvsctl-serve) [ok](b.md#at-1000-x-10-1) [ok](#here) ![ok](pic.png)",
		"[ok](https://example.org/x.md) [ok](../docs/b.md)",
		"`[in a code span](nothing.md)`",
		"```", "[in a fence](nothing.md)", "```",
		"[gone](missing.md) [gone](b.md#no-such) [gone](#nowhere) ![gone](pic.svg)",
	}, "\n"))
	broken, n, err := checkFile(a)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`link "#nowhere": no heading "nowhere" in a.md`,
		`link "b.md#no-such": no heading "no-such" in b.md`,
		`link "missing.md": no file`,
		`link "pic.svg": no file`,
	}
	sort.Strings(broken)
	if strings.Join(broken, "\n") != strings.Join(want, "\n") || n != 10 {
		t.Fatalf("checked %d links, broken:\n%s\nwant 10, broken:\n%s", n, strings.Join(broken, "\n"), strings.Join(want, "\n"))
	}
}

// markdownFiles are the .md files in root and anywhere under root/docs.
func markdownFiles(root string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(root, "*.md"))
	if err != nil {
		return nil, err
	}
	err = filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	})
	return files, err
}

var (
	linkRE     = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpanRE = regexp.MustCompile("``[^`]*``|`[^`]*`")
	schemeRE   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// checkFile returns each relative link of the file that does not resolve,
// and how many relative links it has.
func checkFile(path string) (broken []string, n int, err error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	anchors := map[string]map[string]bool{}
	for _, line := range prose(string(text)) {
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if schemeRE.MatchString(target) {
				continue
			}
			n++
			file, anchor, _ := strings.Cut(target, "#")
			dest := path
			if file != "" {
				dest = filepath.Join(filepath.Dir(path), filepath.FromSlash(file))
				if _, err := os.Stat(dest); err != nil {
					broken = append(broken, fmt.Sprintf("link %q: no file", target))
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			if anchors[dest] == nil {
				if anchors[dest], err = headingAnchors(dest); err != nil {
					return nil, 0, err
				}
			}
			if !anchors[dest][anchor] {
				broken = append(broken, fmt.Sprintf("link %q: no heading %q in %s", target, anchor, filepath.Base(dest)))
			}
		}
	}
	return broken, n, nil
}

// prose is the file's lines outside fenced code blocks, with code spans removed.
func prose(text string) []string {
	var lines []string
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			lines = append(lines, codeSpanRE.ReplaceAllString(line, ""))
		}
	}
	return lines
}

// headingAnchors are the anchors GitHub gives the file's headings: lower
// case, punctuation dropped, spaces as hyphens, a repeated one numbered.
func headingAnchors(path string) (map[string]bool, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	anchors, seen := map[string]bool{}, map[string]int{}
	fenced := false
	for _, line := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		slug := slugify(title)
		if k := seen[slug]; k > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, k)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors, nil
}

func slugify(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// TestReadmeIsADoor: README.md stays short (at most 300 lines) and its map of
// the house names every folder that holds Go code, as `folder/`.
func TestReadmeIsADoor(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(text), "\n"); n > 300 {
		t.Errorf("README.md has %d lines; at most 300 (the rest goes into docs/)", n)
	}
	folders := map[string]bool{}
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") {
			rel, _ := filepath.Rel(root, filepath.Dir(p))
			folders[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(folders) < 20 {
		t.Fatalf("found %d folders with Go code under %s", len(folders), root)
	}
	for f := range folders {
		if !strings.Contains(string(text), "`"+f+"/`") {
			t.Errorf("README.md's map of the house does not name %s/", f)
		}
	}
}
