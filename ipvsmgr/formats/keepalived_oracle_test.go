package formats

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ipvsctl/ipvsctl/internal/testenv"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// keepalivedServers runs Debian's keepalived (2.2.7) on file with config id
// id, checker only, in a network namespace of its own, and reads its own
// view of the virtual servers' real servers: the "Shutting down service RS
// from VS VS" line it logs for each as it stops, as "[VIP]:PORT RS:PORT"
// ("FWM N" a fwmark one's, "[GROUP]:0" a virtual_server group's) (here it stops at once, the
// kernel having no IPVS; where it has, it is stopped after 3 s).
func keepalivedServers(t *testing.T, dir, file, id string) []string {
	t.Helper()
	bin, err := exec.LookPath("keepalived")
	if err != nil {
		bin = "/usr/sbin/keepalived"
		if _, err := os.Stat(bin); err != nil {
			testenv.Need(t, "keepalived is not installed (Debian's keepalived package)")
		}
	}
	if os.Geteuid() != 0 {
		testenv.Need(t, "running keepalived in a network namespace of its own needs root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		testenv.Need(t, "unshare (util-linux) is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, unshare, "--net", bin, "-n", "-l", "-D", "-C", "-f", file, "-i", id,
		"-p", filepath.Join(dir, "keepalived.pid"), "-c", filepath.Join(dir, "checkers.pid"))
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	out, _ := cmd.CombinedOutput()
	re := regexp.MustCompile(`Shutting down (?:\(inhibited\) )?service \[([^\]]+)\]:[a-z]+:(\d+) from VS (?:(\[[^\]]+\]:)(?:[a-z]+:)?(\d+)|(FWM \d+))`)
	var got []string
	for _, m := range re.FindAllStringSubmatch(string(out), -1) {
		got = append(got, fmt.Sprintf("%s %s:%s", m[3]+m[4]+m[5], m[1], m[2]))
	}
	if !strings.Contains(string(out), "Opening file") {
		t.Fatalf("keepalived did not read %s:\n%s", file, out)
	}
	slices.Sort(got)
	return slices.Compact(got)
}

// TestKeepalivedPreprocessorAgreesWithKeepalived: configurations that use
// keepalived's preprocessor (definitions, multi-line ones, conditional
// lines by config id, ${_PWD} in an include, a relative include glob, a
// sorry server at a real server's address) import with the virtual servers
// and real servers keepalived itself sets up from them, for each config id.
// (Debian's keepalived is 2.2.7: these files avoid what 2.4 reads
// differently, a line looked at again after a replacement.)
func TestKeepalivedPreprocessorAgreesWithKeepalived(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"keepalived.conf": "$VIP=198.18.0.1\n@lb1 $W=3\n@^lb1 $W=4\n" +
			"$RS=real_server 198.18.1.1 80 { \\\n  weight $W \\\n  TCP_CHECK { \\\n  } \\\n}\n" +
			"include ${_PWD}/conf.d/*.conf\ninclude more/{a,b}.conf\n" +
			"virtual_server $VIP 80 {\n  protocol TCP\n  lb_kind NAT\n  sorry_server 198.18.1.2 80\n  $RS\n" +
			"@lb1  real_server 198.18.1.2 80 {\n@lb1    TCP_CHECK {\n@lb1    }\n@lb1  }\n" +
			"@^lb1 real_server 198.18.1.3 80 {\n@^lb1   TCP_CHECK {\n@^lb1   }\n@^lb1 }\n}\n",
		"conf.d/web.conf": "$PORT=8080\nvirtual_server ${VIP} ${PORT} {\n  protocol TCP\n  lb_kind NAT\n" +
			"  real_server 198.18.2.1 $PORT {\n    TCP_CHECK {\n    }\n  }\n" +
			"@lb2  real_server 198.18.2.2 $PORT {\n@lb2    TCP_CHECK {\n@lb2    }\n@lb2  }\n}\n",
		"more/a.conf": "virtual_server ${VIP} 443 {\n  protocol TCP\n  lb_kind NAT\n  $RS\n}\n",
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	main := filepath.Join(dir, "keepalived.conf")
	for _, id := range []string{"lb1", "lb2"} {
		t.Run(id, func(t *testing.T) {
			data, err := os.ReadFile(main)
			if err != nil {
				t.Fatal(err)
			}
			st, rep, err := ImportWith(FormatKeepalived, strings.NewReader(string(data)),
				Options{Path: main, ConfigID: id, ReadFile: os.ReadFile, Glob: filepath.Glob})
			if err != nil {
				t.Fatal(err)
			}
			got := importedServers(st)
			for _, s := range st.Services {
				if rs := s.Servers[0]; s.Port == 80 && (rs.Weight == nil || *rs.Weight != map[string]int{"lb1": 3, "lb2": 4}[id]) {
					t.Errorf("weight $W of %s: %v", rs.Address, rs.Weight)
				}
			}
			want := map[string]int{"lb1": 4, "lb2": 5}[id]
			if len(got) != want || rep.Servers != want || rep.Services != 3 {
				t.Errorf("imported %s: %q, want 3 services and %d servers", rep.Summary(), got, want)
			}
			ka := keepalivedServers(t, dir, main, id)
			t.Logf("keepalived: %q", ka)
			if d := cmp.Diff(ka, got); d != "" {
				t.Errorf("real servers (-keepalived +ipvsctl):\n%s", d)
			}
		})
	}
}

// importedServers are the real servers of st as keepalivedServers names
// them.
func importedServers(st *ipvsmgr.State) []string {
	var got []string
	for _, s := range st.Services {
		vs := fmt.Sprintf("[%s]:%d", s.Address, s.Port)
		switch {
		case s.Group != "":
			vs = "[" + s.Group + "]:0"
		case s.FWMark != 0:
			vs = fmt.Sprintf("FWM %d", s.FWMark)
		}
		for _, rs := range s.Servers {
			got = append(got, fmt.Sprintf("%s %s:%d", vs, rs.Address, rs.Port))
		}
	}
	slices.Sort(got)
	return slices.Compact(got)
}

// TestKeepalivedCorpusAgreesWithKeepalived: each corpus keepalived.conf that
// imports sets up the real servers keepalived itself sets up from it (run
// with -i high, as the corpus test imports them).
func TestKeepalivedCorpusAgreesWithKeepalived(t *testing.T) {
	for _, p := range corpusFiles(t, "keepalived") {
		t.Run(filepath.Base(p), func(t *testing.T) {
			t.Parallel() // keepalived mostly waits
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			st, _, err := ImportWith(FormatKeepalived, strings.NewReader(string(data)), rootedOptions(p))
			if err != nil {
				testenv.Elsewhere(t, "TestCorpus", "refused at a line (its .error)")
			}
			abs, err := filepath.Abs(p)
			if err != nil {
				t.Fatal(err)
			}
			got := importedServers(st)
			if d := cmp.Diff(keepalivedServers(t, t.TempDir(), abs, "high"), got); d != "" {
				t.Errorf("real servers (-keepalived +ipvsctl):\n%s", d)
			}
			t.Logf("%d (virtual server, real server) pairs agree", len(got))
		})
	}
}
