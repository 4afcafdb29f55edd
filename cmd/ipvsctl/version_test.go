package main

import (
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	version, commit = "1.2.0+3.gabc1234", "abc1234def56"
	defer func() { version, commit = "", "" }()
	r := runCLI(t, nil, "version")
	want := "ipvsctl 1.2.0+3.gabc1234 (commit abc1234def56, " + runtime.Version() + ")\n"
	if r.code != 0 || r.stdout != want {
		t.Fatalf("version: exit %d %q, want %q", r.code, r.stdout, want)
	}
	r = runCLI(t, nil, "version", "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"version": "1.2.0+3.gabc1234"`) || !strings.Contains(r.stdout, `"go": "go1.`) {
		t.Fatalf("version --json: exit %d\n%s", r.code, r.stdout)
	}
	version, commit = "", ""
	if b := currentBuild(); !strings.HasPrefix(b.Version, release+"+") || b.Commit == "" {
		t.Fatalf("unstamped build: %+v", b)
	}
}

// TestVersionIsTheChangelogs: the version an unstamped build reports is the
// latest release CHANGELOG.md lists (its first "## [X.Y.Z] - DATE" heading,
// after Unreleased), and the package's version script says the same.
func TestVersionIsTheChangelogs(t *testing.T) {
	text, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$`).FindStringSubmatch(string(text))
	if m == nil {
		t.Fatal("CHANGELOG.md has no released version (## [X.Y.Z] - YYYY-MM-DD)")
	}
	if !strings.Contains(string(text), "\n## [Unreleased]\n") {
		t.Error("CHANGELOG.md has no ## [Unreleased] section")
	}
	if release != m[1] {
		t.Errorf("ipvsctl's release is %q, CHANGELOG.md's latest is %q", release, m[1])
	}
	version, commit = "", ""
	if b := currentBuild(); !strings.HasPrefix(b.Version, m[1]+"+") {
		t.Errorf("an unstamped build reports %q, want %s+COMMIT", b.Version, m[1])
	}
	out, err := exec.Command("../../scripts/package/version.sh").Output()
	if err != nil {
		t.Fatalf("scripts/package/version.sh: %v", err)
	}
	v := strings.TrimSpace(string(out))
	if tag, err := exec.Command("git", "describe", "--tags", "--abbrev=0").Output(); err == nil {
		// A tagged checkout reports its tag's version: it must be a release the changelog has.
		want := strings.TrimPrefix(strings.TrimSpace(string(tag)), "v")
		if !strings.Contains(string(text), "\n## ["+want+"] - ") {
			t.Errorf("tag %s is not a release in CHANGELOG.md", want)
		}
	} else if !strings.HasPrefix(v, m[1]+"+") {
		t.Errorf("scripts/package/version.sh says %q, want %s+COMMIT", v, m[1])
	}
}
