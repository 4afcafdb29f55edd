package arpguard

import (
	"flag"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func goldenTargets() map[string]Target {
	a := netip.MustParseAddr
	return map[string]Target{
		"dr-sysctl": {RIP: a("198.18.0.11"), Interface: "eth0", Mode: ModeDRSysctl,
			VIPs: []netip.Addr{a("198.18.0.100"), a("198.18.0.101")}},
		"dr-sysctl-ipv6": {RIP: a("2001:db8::11"), Interface: "eth0", Mode: ModeDRSysctl,
			VIPs: []netip.Addr{a("2001:db8::100")}},
		"dr-arptables": {RIP: a("198.18.0.11"), Interface: "eth0.100", Mode: ModeDRArptables,
			VIPs: []netip.Addr{a("198.18.0.100")}},
		"tun": {RIP: a("198.18.0.11"), Interface: "eth0", Mode: ModeTUN,
			VIPs: []netip.Addr{a("198.18.0.100")}},
		"nat-default": {RIP: a("198.18.1.11"), Interface: "eth0", Mode: ModeNAT, Gateway: a("198.18.1.1")},
		"nat-host": {RIP: a("198.18.1.11"), Interface: "eth0", Mode: ModeNAT, Gateway: a("198.18.1.1"),
			Route: RouteHost, ClientPrefixes: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("198.51.100.7/32")}},
	}
}

func planText(steps []Step) string {
	var b strings.Builder
	for _, s := range steps {
		b.WriteString(s.String() + "\t# drift: " + s.Drift() + "\n")
	}
	return b.String()
}

// TestGolden pins the plan and every rendered script of each mode; run with
// -update after a deliberate change and review the diff.
func TestGolden(t *testing.T) {
	p := DefaultPaths()
	for name, tg := range goldenTargets() {
		t.Run(name, func(t *testing.T) {
			steps, err := Plan(tg, p)
			if err != nil {
				t.Fatal(err)
			}
			for file, got := range map[string]string{
				"plan.txt":  planText(steps),
				"apply.sh":  RenderApply(tg, steps, p),
				"verify.sh": RenderVerify(tg, steps),
				"boot.sh":   renderBoot(tg, runtimeSteps(steps)),
			} {
				compareGolden(t, filepath.Join("testdata", name, file), got)
			}
		})
	}
	compareGolden(t, filepath.Join("testdata", "undo.sh"), RenderUndo(p))
}

func runtimeSteps(steps []Step) []Step {
	var out []Step
	for _, s := range steps {
		switch s.(type) {
		case File, Symlink:
		default:
			out = append(out, s)
		}
	}
	return out
}

func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-golden +got):\n%s", path, diff)
	}
}

// TestScriptsParse runs every rendered script through sh -n: a script that
// does not parse would fail on the real server, not here.
func TestScriptsParse(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		testenv.Need(t, "no sh on this machine")
	}
	p := DefaultPaths()
	scripts := map[string]string{"undo": RenderUndo(p)}
	for name, tg := range goldenTargets() {
		steps, err := Plan(tg, p)
		if err != nil {
			t.Fatal(err)
		}
		scripts[name+"/apply"] = RenderApply(tg, steps, p)
		scripts[name+"/verify"] = RenderVerify(tg, steps)
		scripts[name+"/boot"] = renderBoot(tg, runtimeSteps(steps))
	}
	for name, s := range scripts {
		cmd := exec.Command(sh, "-n")
		cmd.Stdin = strings.NewReader(s)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s does not parse: %v\n%s", name, err, out)
		}
	}
}
