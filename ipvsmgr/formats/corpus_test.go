package formats

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// The corpus (testdata/corpus, see its MANIFEST) is real configuration
// collected from public repositories. Each file either imports, with the
// counts and warnings of NAME.report, or is refused at a line, with the
// message of NAME.error; what imports round-trips: exported in its own
// format and imported again,
// it is the same document.
func TestCorpus(t *testing.T) {
	formats := map[string]string{"keepalived": FormatKeepalived, "lvs.cf": FormatLVSCF, "ipvsadm": FormatIpvsadm}
	n := 0
	for dir, format := range formats {
		for _, p := range corpusFiles(t, dir) {
			n++
			t.Run(p, func(t *testing.T) {
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				st, rep, err := ImportWith(format, bytes.NewReader(data), rootedOptions(p))
				if err != nil {
					var pe *ParseError
					if !errors.As(err, &pe) {
						t.Fatalf("refused without a line: %v", err)
					}
					checkGolden(t, p+".error", err.Error()+"\n")
					if _, statErr := os.Stat(p + ".report"); statErr == nil {
						t.Errorf("%s.report exists, yet the file is refused", p)
					}
					return
				}
				checkGolden(t, p+".report", reportText(rep))
				if _, statErr := os.Stat(p + ".error"); statErr == nil {
					t.Errorf("%s.error exists, yet the file imports", p)
				}
				roundTrip(t, format, st)
			})
		}
	}
	manifest, err := os.ReadFile(filepath.Join("testdata", "corpus", "MANIFEST"))
	if err != nil {
		t.Fatal(err)
	}
	for dir := range formats {
		for _, p := range corpusFiles(t, dir) {
			if !bytes.Contains(manifest, []byte("\n"+dir+"/"+filepath.Base(p)+"\t")) {
				t.Errorf("%s is not in the MANIFEST", p)
			}
		}
	}
	if n < 30 {
		t.Errorf("the corpus has %d files; want at least 30", n)
	}
}

func corpusFiles(t *testing.T, dir string) []string {
	t.Helper()
	all, err := filepath.Glob(filepath.Join("testdata", "corpus", dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range all {
		if !strings.HasSuffix(p, ".report") && !strings.HasSuffix(p, ".error") && filepath.Base(p) != "root" && filepath.Base(p) != "MANIFEST" {
			out = append(out, p)
		}
	}
	return out
}

// roundTrip exports st in format and imports it again: the same document
// must come back. A keepalived export is one file: the keys kept from an
// included file come back without its name, and in the order the export
// writes them (globals first, then each block's). An ldirectord export
// writes the globals first too, then each virtual's: its kept keys come
// back in that order, each scope's in its own.
func roundTrip(t *testing.T, format string, st *ipvsmgr.State) {
	t.Helper()
	var out bytes.Buffer
	if err := Export(format, st, &out); err != nil {
		t.Fatalf("export %s: %v", format, err)
	}
	back, err := Import(format, bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatalf("re-import of the %s export: %v\n%s", format, err, out.String())
	}
	opts := []cmp.Option{cmpopts.EquateEmpty(), cmpopts.IgnoreFields(ipvsmgr.ImportedKey{}, "Line")}
	if format == FormatKeepalived {
		opts = append(opts, cmpopts.SortSlices(func(a, b ipvsmgr.ImportedKey) bool {
			return a.Scope+"\x00"+a.Key+"\x00"+a.Value < b.Scope+"\x00"+b.Key+"\x00"+b.Value
		}), cmp.Transformer("plainScope", func(k ipvsmgr.ImportedKey) ipvsmgr.ImportedKey {
			k.Scope = kaPlainScope(k.Scope)
			return k
		}))
	}
	if format == FormatLdirectord {
		opts = append(opts, cmp.FilterValues(func(x, y []ipvsmgr.ImportedKey) bool { return len(x) > 0 && len(y) > 0 },
			cmp.Transformer("byScope", func(ks []ipvsmgr.ImportedKey) []ipvsmgr.ImportedKey {
				out := slices.Clone(ks)
				slices.SortStableFunc(out, func(a, b ipvsmgr.ImportedKey) int { return strings.Compare(a.Scope, b.Scope) })
				return out
			})))
	}
	if d := cmp.Diff(st, back, opts...); d != "" {
		t.Errorf("%s round trip (-imported +re-imported):\n%s\nexported:\n%s", format, d, out.String())
	}
}
