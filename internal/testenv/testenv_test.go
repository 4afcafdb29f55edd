package testenv

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// rawSkip is a skip that bypasses this package.
var rawSkip = regexp.MustCompile(`\.(Skip|Skipf|SkipNow)\(`)

// TestNoRawSkips: every skip in the module's tests goes through Need,
// OptIn or Elsewhere, so that none can fire under CI unnoticed.
func TestNoRawSkips(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not at %s: %v", root, err)
	}
	self, _ := filepath.Abs(".")
	var found []string
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == self || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for i, line := range strings.Split(string(b), "\n") {
			if rawSkip.MatchString(line) && !strings.HasPrefix(strings.TrimSpace(line), "//") {
				rel, _ := filepath.Rel(root, path)
				found = append(found, rel+":"+strconv.Itoa(i+1)+": "+strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("walked only %d Go files under %s", files, root)
	}
	if len(found) > 0 {
		t.Errorf("skips that bypass internal/testenv (use testenv.Need, OptIn or Elsewhere):\n%s", strings.Join(found, "\n"))
	}
}

// TestNeedFailsUnderCI: a missing environment is a skip on a laptop and a
// failure under CI.
func TestNeedFailsUnderCI(t *testing.T) {
	for _, strict := range []bool{false, true} {
		t.Setenv("CI", "")
		t.Setenv(StrictVar, "")
		if strict {
			t.Setenv(StrictVar, "1")
		}
		r := &recorder{TB: t}
		func() {
			defer func() { recover() }() // Skip and Fatal stop the goroutine; the recorder panics instead
			Need(r, "needs root")
		}()
		if r.skipped == strict || r.failed != strict {
			t.Errorf("strict %v: skipped %v, failed %v", strict, r.skipped, r.failed)
		}
	}
	t.Setenv("CI", "true")
	if !Strict() {
		t.Error("CI=true is not strict")
	}
}

type recorder struct {
	testing.TB
	skipped, failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Skip(...any)           { r.skipped = true; panic("skip") }
func (r *recorder) Skipf(string, ...any)  { r.skipped = true; panic("skip") }
func (r *recorder) Fatalf(string, ...any) { r.failed = true; panic("fatal") }
