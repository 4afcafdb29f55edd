// Package walls holds the test of the module's import rules: the walls
// between the rooms that README.md's "The map of the house" names.
package walls

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/ipvsctl/ipvsctl/"

// A rule: files under from (a folder of the module, "" for any) must not
// import a package under any of banned, except the files listed in allow.
type rule struct {
	why    string
	from   string
	own    bool // only from's own package, not the folders under it
	banned []string
	allow  []string
}

var rules = []rule{
	{why: "the model and the real-server tools know nothing of the daemon", from: "ipvsmgr/",
		banned: []string{"server", "web", "migrations"}},
	{why: "the model and the real-server tools know nothing of the daemon", from: "arpguard/",
		banned: []string{"server", "web", "migrations"}},
	{why: "the core imports only its leaves; the rooms import the core", from: "server/", own: true,
		banned: []string{"server/daemon", "server/redundancy", "server/replication", "server/httpd",
			"server/panel", "server/client", "server/metrics", "server/servertest"}},
	{why: "the daemon runs no VRRP: the redundancy runner attaches to it", from: "server/daemon/",
		banned: []string{"server/redundancy", "server/replication", "server/httpd", "server/panel"}},
	{why: "the HTTP side and the panel speak of the core's records, never of the store", from: "server/httpd/",
		banned: []string{"server/store"}},
	{why: "the HTTP side and the panel speak of the core's records, never of the store", from: "server/panel/",
		banned: []string{"server/store"}},
	{why: "only the core and the composition roots that open a database reach the store", from: "",
		banned: []string{"server/store"},
		allow: []string{"server/", "cmd/ipvsctl/state.go", "cmd/ipvsctl/serve.go", "cmd/ipvsctl/realserver.go",
			"cmd/ipvsctl/completion.go"}},
}

func TestImportWalls(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not at %s: %v", root, err)
	}
	fset := token.NewFileSet()
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		// Tests may wire what they test as a composition root does.
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.HasPrefix(p, module) {
				continue
			}
			p = strings.TrimPrefix(p, module)
			for _, r := range rules {
				if r.breaks(rel, p) {
					t.Errorf("%s imports %s: %s", rel, p, r.why)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read only %d Go files under %s", files, root)
	}
}

func (r rule) breaks(file, imp string) bool {
	if !strings.HasPrefix(file, r.from) {
		return false
	}
	if r.own && strings.Contains(strings.TrimPrefix(file, r.from), "/") {
		return false
	}
	for _, a := range r.allow {
		if file == a || strings.HasSuffix(a, "/") && strings.HasPrefix(file, a) {
			return false
		}
	}
	for _, b := range r.banned {
		if imp == b || strings.HasPrefix(imp, b+"/") {
			return true
		}
	}
	return false
}

// The rules bite: a file of each room importing what its wall bans is
// caught, and the allowed ones pass.
func TestImportWallsBite(t *testing.T) {
	for _, c := range []struct {
		file, imp string
		broken    bool
	}{
		{"ipvsmgr/plan.go", "server", true},
		{"ipvsmgr/health/http.go", "server/store", true},
		{"server/core.go", "server/daemon", true},
		{"server/core.go", "server/store", false},
		{"server/panel/draft.go", "server/store", true},
		{"server/httpd/api.go", "server/store", true},
		{"server/daemon/daemon.go", "server", false},
		{"server/daemon/daemon.go", "server/redundancy", true},
		{"cmd/ipvsctl/audit.go", "server/store", true},
		{"cmd/ipvsctl/state.go", "server/store", false},
		{"scripts/lab/lab.go", "server/store", true},
	} {
		broken := false
		for _, r := range rules {
			broken = broken || r.breaks(c.file, c.imp)
		}
		if broken != c.broken {
			t.Errorf("%s importing %s: broken %v, want %v", c.file, c.imp, broken, c.broken)
		}
	}
}
