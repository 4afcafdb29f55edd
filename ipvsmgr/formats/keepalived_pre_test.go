package formats

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// memFiles are the options of an import whose includes read files.
func memFiles(path, id string, files map[string]string) Options {
	return Options{
		Path:     path,
		ConfigID: id,
		ReadFile: func(name string) ([]byte, error) {
			if s, ok := files[name]; ok {
				return []byte(s), nil
			}
			return nil, os.ErrNotExist
		},
		Glob: func(p string) ([]string, error) {
			var m []string
			for name := range files {
				if ok, _ := filepath.Match(p, name); ok {
					m = append(m, name)
				}
			}
			return m, nil
		},
	}
}

// preprocess runs keepalived's preprocessor on in: the words of each line
// the keyword parser gets, with the line they come from.
func preprocess(t *testing.T, in string, o Options) ([]string, error) {
	t.Helper()
	k := &kaImporter{importer: &importer{format: FormatKeepalived, opts: o, rep: &Report{}, files: []string{""}}}
	p := newKaPre(k, o.ConfigID)
	if err := p.file([]byte(in), o.Path, 0, 0); err != nil {
		return nil, err
	}
	var out []string
	for i, l := range strings.Split(strings.TrimSuffix(p.out.String(), "\n"), "\n") {
		if w := strings.Fields(kaDecomment(l)); len(w) > 0 {
			file, line := k.lineRef(p.lines[i])
			out = append(out, strings.TrimPrefix(file+":", ":")+strconv.Itoa(line)+" "+strings.Join(w, " "))
		}
	}
	return out, nil
}

func TestKeepalivedPreprocessor(t *testing.T) {
	cases := []struct {
		name, in, id string
		want         []string
	}{
		{"definitions and references", "$VIP=198.18.0.1\n$PORT=80 # the web\nvirtual_server $VIP ${PORT} {\n  x ${VIP}:${PORT},$PORT)\n}\n", "",
			[]string{"3 virtual_server 198.18.0.1 80 {", "4 x 198.18.0.1:80,80)", "5 }"}},
		{"a blank before = is no definition", "$A =1\n", "", []string{"1 $A =1"}},
		{"undefined stays as written", "$A=1\nx $B \"${B}\" $A$A ${A}${A} $Ax\n", "", []string{"2 x $B \"${B}\" $A1 11 $Ax"}},
		{"replaced when used, recursively", "$BASE=10.2.${SUB}\n$SUB=0\n${BASE}.100\n$SUB=10\n${BASE}.100\n", "",
			[]string{"3 10.2.0.100", "5 10.2.10.100"}},
		{"multi-line", "$RS=real_server 198.18.1.1 80 { \\\n  weight 2 \\\n}\nvirtual_server 198.18.0.1 80 {\n  $RS\n}\n", "",
			[]string{"4 virtual_server 198.18.0.1 80 {", "5 real_server 198.18.1.1 80 {", "5 weight 2", "5 }", "6 }"}},
		{"multi-line only at the end of a line", "$M=a \\\nb\nx $M y\n", "", []string{"3 x $M y"}},
		{"a blank line ends a multi-line definition", "$M=a \\\n\nb\n$M\n", "", []string{"3 b", "4 a"}},
		{"conditional lines", "@high priority 170\n@low priority 85\n@^high state BACKUP\n@^low state MASTER\n@high\n", "high",
			[]string{"1 priority 170", "4 state MASTER"}},
		{"conditional without an id", "@high priority 170\n@^high state BACKUP\n", "",
			[]string{"2 state BACKUP"}},
		{"a conditional definition", "@main $P=240\n@backup $P=200\npriority $P\n", "backup", []string{"3 priority 200"}},
		{"built-ins", "a ${_INSTANCE} ${_HASH}b ${_BANG} $_PWD\n", "lb1", []string{"1 a lb1"}},
		{"_PWD is the file's directory", "a ${_PWD}/x\n", "", []string{"1 a /etc/keepalived/x"}},
		{"a definition overrides a built-in", "$_INSTANCE=me\na ${_INSTANCE}\n", "lb1", []string{"2 a me"}},
		{"parameters only where a built-in takes them", "$A=1\na ${A x} ${_ENV IPVSCTL_TEST_ENV}\n", "", []string{"2 a ${A x} from-env"}},
	}
	t.Setenv("IPVSCTL_TEST_ENV", "from-env")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := preprocess(t, c.in, Options{Path: "/etc/keepalived/keepalived.conf", ConfigID: c.id})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestKeepalivedPreprocessorErrors(t *testing.T) {
	for _, c := range []struct{ name, in, msg string }{
		{"self", "$A=$A\nx $A\n", "line 2: $A: more than 1000 replacements"},
		{"grows", "$A=xx$A\nx $A\n", "line 2: $A: the line grows past keepalived's 1023 bytes"},
		{"random", "x ${_RANDOM 1 9}\n", "line 1: ${_RANDOM}: keepalived draws a new number"},
		{"random words", "x ${_RANDOM a}\n", "line 1: Definition _RANDOM requires numeric parameters only."},
		{"env params", "x ${_ENV A B}\n", "line 1: Definition _ENV requires between 1 and 1 parameters, 2 specified."},
		{"undefined in braces", "virtual_server 198.18.0.1 80 {\n  real_server ${RS} 80 {\n  }\n}\n", "line 2: ${RS} is not defined: keepalived leaves it as written, and takes its { and } for a block's"},
		{"seq", "~SEQ(N,1,3) x $N\n", "line 1: ~SEQ: keepalived's line repetition"},
		{"no recheck after a replacement (2.4)", "$IF=@main\nvrrp_instance I {\n  $IF priority 240\n}\n", `line 3: unknown keyword "@main": keepalived 2.4 does not read a line again`},
		{"no definition made by a replacement", "$D=$E=1\n$D\n", `line 2: unknown keyword "$E=1"`},
		{"endless lines", "$M=x \\\n$M\n$M\n", "line 3: $M: multi-line definitions make more than 100000 lines"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := preprocess(t, c.in, Options{Path: "/etc/keepalived/keepalived.conf"})
			var pe *ParseError
			if !errors.As(err, &pe) || !strings.Contains(pe.Error(), c.msg) {
				t.Errorf("got %v, want %q", err, c.msg)
			}
		})
	}
	// --ignore-unknown passes over such a line, as keepalived does.
	st, rep, err := ImportWith(FormatKeepalived, strings.NewReader("$IF=@main\nvrrp_instance I {\n  $IF priority 240\n  state BACKUP\n}\n"), Options{IgnoreUnknown: true, ConfigID: "main"})
	if err != nil || len(rep.Ignored) != 1 || rep.Ignored[0].Line != 3 || len(st.Imported) != 1 || strings.Contains(st.Imported[0].Value, "priority") {
		t.Errorf("ignored: %v %+v %+v", err, rep, st)
	}
	// Without a path (the API's import), ${_PWD} is not known.
	if _, err := Import(FormatKeepalived, strings.NewReader("include ${_PWD}/a.conf\n")); err == nil || !strings.Contains(err.Error(), "line 1: ${_PWD}: the directory of the file is not known") {
		t.Errorf("_PWD without a path: %v", err)
	}
}

// TestKeepalivedPreprocessorIncludes: an include is read after the
// replacements, relative to the including file's directory (keepalived
// reads each file from its own directory), with its globs; definitions are
// one set across the files; a line of an included file is named by its
// file.
func TestKeepalivedPreprocessorIncludes(t *testing.T) {
	files := map[string]string{
		"/etc/ka/keepalived.conf":       "$DIR=conf.d\n@lb1 include ${DIR}/*.conf\n@^lb1 include none.conf\nvirtual_server $VIP 80 {\n  $SERVERS\n}\n",
		"/etc/ka/conf.d/a.conf":         "$VIP=198.18.0.1\ninclude ${_PWD}/sub/*.conf\n",
		"/etc/ka/conf.d/sub/rs.conf":    "$SERVERS=real_server 198.18.1.1 80 { \\\n  weight 2 \\\n} \\\nreal_server 198.18.1.2 80 { \\\n}\n",
		"/etc/ka/conf.d/sub/notes.conf": "# nothing\n",
	}
	o := memFiles("/etc/ka/keepalived.conf", "lb1", files)
	got, err := preprocess(t, files[o.Path], o)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"4 virtual_server 198.18.0.1 80 {", "5 real_server 198.18.1.1 80 {", "5 weight 2", "5 }", "5 real_server 198.18.1.2 80 {", "5 }", "6 }"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	st, rep, err := ImportWith(FormatKeepalived, strings.NewReader(files[o.Path]), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Services != 1 || rep.Servers != 2 || st.Services[0].Address != "198.18.0.1" || *st.Services[0].Servers[0].Weight != 2 {
		t.Errorf("imported %s: %+v", rep.Summary(), st.Services)
	}
	// Another id reads another include: none.conf is missing, which a plain
	// include only notes; $VIP is then undefined, and stays as written.
	o.ConfigID = "lb2"
	_, _, err = ImportWith(FormatKeepalived, strings.NewReader(files[o.Path]), o)
	if err == nil || err.Error() != `keepalived line 4: "$VIP" is not an IP address` {
		t.Errorf("without the definitions: %v", err)
	}
	// An error in an included file names it.
	files["/etc/ka/conf.d/sub/rs.conf"] = "$SERVERS=real_server 198.18.1.1 80 { \\\n  weigth 2 \\\n}\n"
	o.ConfigID = "lb1"
	if _, _, err = ImportWith(FormatKeepalived, strings.NewReader(files[o.Path]), o); err == nil || !strings.Contains(err.Error(), `keepalived line 5: unknown keyword "weigth"`) {
		t.Errorf("error in an expanded definition: %v", err)
	}
	files["/etc/ka/conf.d/a.conf"] = "$VIP=198.18.0.1\n\nvirtual_server ${VIP} 81 {\n  lb_kind FAST\n}\n"
	if _, _, err = ImportWith(FormatKeepalived, strings.NewReader(files[o.Path]), o); err == nil || err.Error() != `keepalived /etc/ka/conf.d/a.conf line 4: lb_kind "FAST": want DR, NAT or TUN` {
		t.Errorf("error in an included file: %v", err)
	}
}

// A sorry server at one of the service's real servers is what keepalived
// accepts (s_svr_duplicates_rs): it imports, the real server counted once.
func TestKeepalivedSorryServerIsARealServer(t *testing.T) {
	in := "virtual_server 198.18.0.1 80 {\n  protocol TCP\n  lb_kind NAT\n  sorry_server 198.18.0.2 80\n" +
		"  real_server 198.18.0.2 80 {\n    TCP_CHECK {\n    }\n  }\n  real_server 198.18.0.3 80 {\n    TCP_CHECK {\n    }\n  }\n}\n"
	st, rep, err := ImportWith(FormatKeepalived, strings.NewReader(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Services != 1 || rep.Servers != 2 || st.Services[0].SorryServer == nil || st.Services[0].SorryServer.Address != "198.18.0.2" {
		t.Errorf("imported %s: %+v", rep.Summary(), st.Services[0])
	}
	roundTrip(t, FormatKeepalived, st)
}
