package formats

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// importFile imports a sample and checks the result against its golden JSON
// (the sample's path + ".golden.json").
func importFile(t *testing.T, format, path string) *ipvsmgr.State {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, rep, err := ImportWith(format, bytes.NewReader(data), rootedOptions(path))
	if err != nil {
		t.Fatalf("import %s: %v", path, err)
	}
	checkGolden(t, path+".report", reportText(rep))
	if _, err := ipvsmgr.Compile(st); err != nil {
		t.Fatalf("import %s: the state does not compile: %v", path, err)
	}
	var got bytes.Buffer
	if err := st.Encode(&got); err != nil {
		t.Fatal(err)
	}
	golden := path + ".golden.json"
	if *update {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if d := cmp.Diff(string(want), got.String()); d != "" {
		t.Errorf("import %s differs from %s (-want +got):\n%s", path, golden, d)
	}
	// The golden JSON is itself a valid document that imports to the same state.
	again, err := Import(FormatJSON, bytes.NewReader(got.Bytes()))
	if err != nil {
		t.Fatalf("re-import of the golden JSON: %v", err)
	}
	if d := cmp.Diff(st, again, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("JSON round trip of %s (-first +second):\n%s", path, d)
	}
	return st
}

// rootedOptions reads included files as from a machine whose root is the
// sample's directory's root/ (so that /etc/keepalived/conf.d/*.conf is
// testdata/keepalived/root/etc/keepalived/conf.d/*.conf), the same on every
// machine.
func rootedOptions(path string) Options {
	root, _ := filepath.Abs(filepath.Join(filepath.Dir(path), "root"))
	local := func(name string) string {
		if filepath.IsAbs(name) {
			return filepath.Join(root, name)
		}
		return name
	}
	return Options{
		Path: path,
		// keepalived.conf.conditional_conf is run with -i high or -i low.
		ConfigID: "high",
		ReadFile: func(name string) ([]byte, error) { return os.ReadFile(local(name)) },
		Glob: func(pattern string) ([]string, error) {
			m, err := filepath.Glob(local(pattern))
			for i := range m {
				if filepath.IsAbs(pattern) {
					m[i] = strings.TrimPrefix(m[i], root)
				}
			}
			return m, err
		},
	}
}

// reportText is a report as its golden file holds it: the summary, then a
// line per warning and per ignored keyword.
func reportText(rep *Report) string {
	var b strings.Builder
	b.WriteString(rep.Summary() + "\n")
	if n := rep.Node; n != nil {
		fmt.Fprintf(&b, "node: priority %d, role %s (line %d)\n", n.Priority, n.Role, n.Line)
	}
	for _, w := range rep.Warnings {
		b.WriteString("warning: " + w.String() + "\n")
	}
	for _, w := range rep.Ignored {
		b.WriteString("ignored: " + w.String() + "\n")
	}
	return b.String()
}

func checkGolden(t *testing.T, golden, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("%s differs (-want +got):\n%s", golden, d)
	}
}

func samples(t *testing.T, dir string) []string {
	t.Helper()
	all, err := filepath.Glob(filepath.Join("testdata", dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range all {
		if strings.HasSuffix(p, ".golden.json") || strings.HasSuffix(p, ".md") || strings.HasSuffix(p, ".out") ||
			strings.HasSuffix(p, ".report") || strings.HasSuffix(p, ".error") || filepath.Base(p) == "root" {
			continue
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		t.Fatalf("no samples in testdata/%s", dir)
	}
	return out
}

// errorCase is malformed input and what its error must say.
type errorCase struct {
	name, in string
	line     int
	msg      string // substring of the message
}

func checkErrors(t *testing.T, format string, cases []errorCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, err := Import(format, strings.NewReader(c.in))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("want a *ParseError, got %v (state %v)", err, st)
			}
			if st != nil {
				t.Errorf("a state came back with the error")
			}
			if pe.Format != format || pe.Line != c.line || !strings.Contains(pe.Msg, c.msg) {
				t.Errorf("got %q (line %d), want line %d with %q", pe.Error(), pe.Line, c.line, c.msg)
			}
			if !strings.HasPrefix(pe.Error(), format+" line ") {
				t.Errorf("Error() = %q, want it to start with %q", pe.Error(), format+" line ")
			}
		})
	}
}

func TestFormats(t *testing.T) {
	in, out := Formats()
	if d := cmp.Diff([]string{"json", "ipvsadm", "lvs.cf", "keepalived", "ldirectord"}, in); d != "" {
		t.Error(d)
	}
	if d := cmp.Diff([]string{"json", "ipvsadm", "lvs.cf", "keepalived", "ldirectord"}, out); d != "" {
		t.Error(d)
	}
	if _, err := Import("yaml", strings.NewReader("")); err == nil || !strings.Contains(err.Error(), `"yaml"`) {
		t.Errorf("unknown import format: %v", err)
	}
	if err := Export("yaml", &ipvsmgr.State{}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), `"yaml"`) {
		t.Errorf("unknown export format: %v", err)
	}
}

func TestParseErrorText(t *testing.T) {
	e := &ParseError{Format: "lvs.cf", Line: 12, Msg: "what"}
	if e.Error() != "lvs.cf line 12: what" {
		t.Error(e.Error())
	}
}
