package main

import (
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
	if b := currentBuild(); !strings.HasPrefix(b.Version, "0.0.0+") || b.Commit == "" {
		t.Fatalf("unstamped build: %+v", b)
	}
}
