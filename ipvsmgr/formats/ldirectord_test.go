package formats

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ipvsctl/ipvsctl/internal/testenv"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// ldirectordScript is Debian's ldirectord (package ldirectord, 1.186), whose
// read_config the tests run through testdata/ldirectord/read_config.pl.
const ldirectordScript = "/usr/sbin/ldirectord"

func needLdirectord(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(ldirectordScript); err != nil {
		testenv.Need(t, "ldirectord's parser: apt-get install ldirectord ("+err.Error()+")")
	}
	if _, err := exec.LookPath("perl"); err != nil {
		testenv.Need(t, "perl, to run ldirectord's read_config")
	}
}

// ldLoaded is what ldirectord's read_config loaded: sorted "V ..." and
// "R ..." lines, or the line it refused.
type ldLoaded struct {
	virtuals []string
	errLine  int
	errMsg   string
}

func ldirectordReads(t *testing.T, path string) ldLoaded {
	t.Helper()
	out, err := exec.Command("perl", filepath.Join("testdata", "ldirectord", "read_config.pl"), ldirectordScript, path).Output()
	if err != nil {
		t.Fatalf("ldirectord's read_config on %s: %v", path, err)
	}
	var l ldLoaded
	var cur *strings.Builder
	flush := func() {
		if cur != nil {
			l.virtuals = append(l.virtuals, cur.String())
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) > 2 && f[0] == "ERROR":
			l.errLine, _ = strconv.Atoi(f[1])
			l.errMsg = strings.Join(f[2:], " ")
		case len(f) >= 2 && f[0] == "V":
			flush()
			cur = &strings.Builder{}
			fmt.Fprintf(cur, "%s %s;", f[1], f[2])
		case len(f) == 4 && f[0] == "R":
			fmt.Fprintf(cur, " %s %s %s", f[1], f[2], f[3])
		}
	}
	flush()
	sort.Strings(l.virtuals)
	return l
}

// ourReads renders an imported state as ldirectordReads does.
func ourReads(st *ipvsmgr.State) []string {
	var vs []string
	for _, svc := range st.Services {
		var b strings.Builder
		if svc.FWMark > 0 {
			fmt.Fprintf(&b, "fwm:%d", svc.FWMark)
		} else {
			fmt.Fprintf(&b, "%s:%s:%d", svc.Protocol, bracket(svc.Address), svc.Port)
		}
		fmt.Fprintf(&b, " %s;", svc.Scheduler)
		for _, rs := range svc.Servers {
			f := rs.Forwarding
			if f == "" {
				f = "dr"
			}
			fmt.Fprintf(&b, " %s:%d %s %d", bracket(rs.Address), rs.Port, ldForwardingBack[f], rs.EffectiveWeight())
		}
		vs = append(vs, b.String())
	}
	sort.Strings(vs)
	return vs
}

// compareWithLdirectord imports path and checks that it holds the virtual
// services and real servers ldirectord loads, or that both refuse the
// same line.
func compareWithLdirectord(t *testing.T, path string) (*ipvsmgr.State, *Report, error) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := ldirectordReads(t, path)
	st, rep, err := ImportWith(FormatLdirectord, bytes.NewReader(data), Options{})
	if want.errLine > 0 {
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Fatalf("ldirectord refuses line %d (%s); ipvsctl: %v", want.errLine, want.errMsg, err)
		}
		if pe.Line != want.errLine {
			t.Errorf("ldirectord refuses line %d (%s); ipvsctl refuses line %d: %v", want.errLine, want.errMsg, pe.Line, err)
		}
		return nil, nil, err
	}
	if err != nil {
		t.Fatalf("ldirectord loads %d virtual services; ipvsctl refuses: %v", len(want.virtuals), err)
	}
	if d := cmp.Diff(want.virtuals, ourReads(st)); d != "" {
		t.Errorf("virtual services and real servers (-ldirectord +ipvsctl):\n%s", d)
	}
	return st, rep, nil
}

// TestLdirectordCorpus: every collected ldirectord.cf imports with the
// services and real servers ldirectord's own read_config loads, or is
// refused at the line it refuses; what imports round-trips through an
// export that ldirectord loads the same way.
func TestLdirectordCorpus(t *testing.T) {
	needLdirectord(t)
	files, err := filepath.Glob(filepath.Join("testdata", "ldirectord", "*.cf"))
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(filepath.Join("testdata", "ldirectord", "MANIFEST.md"))
	if err != nil {
		t.Fatal(err)
	}
	imported, refused, services, servers := 0, 0, 0, 0
	for _, p := range files {
		if !bytes.Contains(manifest, []byte("| "+filepath.Base(p)+" |")) {
			t.Errorf("%s is not in MANIFEST.md", p)
		}
		t.Run(filepath.Base(p), func(t *testing.T) {
			st, rep, err := compareWithLdirectord(t, p)
			if err != nil {
				refused++
				checkGolden(t, p+".error", err.Error()+"\n")
				return
			}
			imported++
			services += rep.Services
			servers += rep.Servers
			checkGolden(t, p+".report", reportText(rep))
			roundTrip(t, FormatLdirectord, st)
			exportLoadsInLdirectord(t, st)
		})
	}
	t.Logf("%d files: %d import (%d virtual services, %d real servers), %d refused at ldirectord's line", len(files), imported, services, servers, refused)
	if len(files) < 12 {
		t.Errorf("the corpus has %d files; want at least 12", len(files))
	}
}

// exportLoadsInLdirectord writes st as ldirectord.cf and checks that
// ldirectord loads the same services and servers from it.
func exportLoadsInLdirectord(t *testing.T, st *ipvsmgr.State) {
	t.Helper()
	var out bytes.Buffer
	if err := Export(FormatLdirectord, st, &out); err != nil {
		t.Fatalf("export: %v", err)
	}
	p := filepath.Join(t.TempDir(), "ldirectord.cf")
	if err := os.WriteFile(p, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got := ldirectordReads(t, p)
	if got.errLine > 0 {
		t.Fatalf("ldirectord refuses the export at line %d: %s\n%s", got.errLine, got.errMsg, out.String())
	}
	if d := cmp.Diff(ourReads(st), got.virtuals); d != "" {
		t.Errorf("the export as ldirectord loads it (-ipvsctl +ldirectord):\n%s\n%s", d, out.String())
	}
}
