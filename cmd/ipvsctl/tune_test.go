package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
)

// TestTuneCheckApplyUndo runs the tune verbs over a director's /proc and
// /sys laid out under a temporary root: the table and its summary, JSON,
// a dry run that writes nothing, apply writing sysctl.d and the live
// values, and undo restoring them.
func TestTuneCheckApplyUndo(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"proc/sys/net/ipv4/vs/conn_reuse_mode":      "1\n",
		"proc/sys/net/ipv4/vs/expire_nodest_conn":   "0\n",
		"proc/sys/net/ipv4/vs/amemthresh":           "1024\n",
		"proc/sys/net/ipv4/vs/drop_entry":           "0\n",
		"proc/sys/net/ipv4/vs/conntrack":            "0\n",
		"proc/sys/net/ipv4/ip_forward":              "0\n",
		"proc/sys/net/ipv4/conf/all/rp_filter":      "1\n",
		"proc/sys/net/ipv4/conf/default/rp_filter":  "1\n",
		"sys/module/ip_vs/parameters/conn_tab_bits": "12\n",
		"proc/net/ip_vs_conn":                       "Pro FromIP   FPrt ToIP     TPrt DestIP   DPrt State       Expires PEName PEData\n",
		"sys/devices/system/cpu/online":             "0\n",
	}
	for p, c := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	k := fakekernel.New()
	db := filepath.Join(t.TempDir(), "ipvsctl.db")
	run := func(want int, args ...string) cliRun {
		t.Helper()
		var out, errb bytes.Buffer
		env := &cliEnv{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }, kernel: k, hostRoot: root}
		r := cliRun{dispatch(env, append([]string{"--db", db}, args...)), out.String(), errb.String()}
		if r.code != want {
			t.Fatalf("ipvsctl %s: exit %d, want %d\n%s%s", strings.Join(args, " "), r.code, want, r.stdout, r.stderr)
		}
		return r
	}
	run(0, "apply", "-f", writeDoc(t, `{"services":[{"name":"web-nat","address":"198.18.0.110","port":80,"forwarding":"nat",
	  "servers":[{"address":"198.18.1.11"}]}]}`))

	r := run(0, "tune", "check", "--conn-rate", "200", "--lifetime", "200")
	for _, want := range []string{
		"load: 0 connection entries, 200 new a second, 200 s in the table (planned with --conn-rate/--lifetime)",
		"STATUS   SETTING",
		"FAR OFF  ip_vs conn_tab_bits",
		"FAR OFF  net.ipv4.ip_forward",
		"ip_vs conn_tab_bits: 0 entries now; 200 conns/s x 200 s lifetime = 40000",
		"source: net/netfilter/ipvs/Kconfig (IP_VS_TAB_BITS help)",
		"only when ip_vs is next loaded",
		"settings: ",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("tune check lacks %q:\n%s", want, r.stdout)
		}
	}
	if last := strings.TrimSpace(r.stdout[strings.LastIndex(strings.TrimSpace(r.stdout), "\n")+1:]); !strings.HasSuffix(last, "informational") {
		t.Errorf("the last line is not the summary: %q", last)
	}
	var rep struct {
		Findings []struct{ Setting, Current, Recommended, Status, Source string }
		Summary  string
		FarOff   bool `json:"far_off"`
	}
	if err := json.Unmarshal([]byte(run(0, "tune", "check", "--json").stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.FarOff || rep.Summary == "" || len(rep.Findings) < 8 {
		t.Errorf("tune check --json: %+v", rep)
	}

	run(0, "tune", "apply", "--dry-run")
	if _, err := os.Stat(filepath.Join(root, "etc/sysctl.d/90-ipvsctl.conf")); err == nil {
		t.Fatal("a dry run wrote sysctl.d")
	}
	r = run(0, "tune", "apply")
	if !strings.Contains(r.stdout, "+ net.ipv4.ip_forward = 1") || !strings.Contains(r.stdout, "sysctl net.ipv4.ip_forward: 0 -> 1 (now)") {
		t.Errorf("tune apply shows no diff first:\n%s", r.stdout)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "proc/sys/net/ipv4/ip_forward")); string(b) != "1\n" {
		t.Errorf("ip_forward after apply: %q", b)
	}
	if out := run(0, "tune", "check").stdout; !regexp.MustCompile(`(?m)^ok +net\.ipv4\.ip_forward +1 `).MatchString(out) {
		t.Errorf("ip_forward not ok after apply:\n%s", out)
	}
	if r := run(0, "tune", "apply"); !strings.HasPrefix(r.stdout, "nothing to change") {
		t.Errorf("a second apply: %s", r.stdout)
	}
	r = run(0, "tune", "undo")
	if !strings.Contains(r.stdout, "sysctl net.ipv4.ip_forward: 1 -> 0 (restored)") {
		t.Errorf("tune undo: %s", r.stdout)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "proc/sys/net/ipv4/ip_forward")); string(b) != "0\n" {
		t.Errorf("ip_forward after undo: %q", b)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/sysctl.d/90-ipvsctl.conf")); err == nil {
		t.Error("undo left the sysctl.d file that was not there before")
	}
	run(1, "tune", "undo")

	if r := run(2, "tune", "check", "--conn-rate", "-5"); !strings.Contains(r.stderr, "--conn-rate -5") {
		t.Errorf("bad --conn-rate: %s", r.stderr)
	}
	if r := run(2, "tune", "check", "--server", "https://198.18.0.1:3636"); !strings.Contains(r.stderr, "runs on the director itself") {
		t.Errorf("--server: %s", r.stderr)
	}
	run(2, "tune", "nonsense")
}
