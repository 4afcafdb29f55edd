package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version and commit are stamped in at build time by scripts/package/ldflags.sh
// (go build -ldflags "-X main.version=... -X main.commit=...").
var (
	version = ""
	commit  = ""
)

// release is the latest released version in CHANGELOG.md (TestVersionIsTheChangelogs
// checks): what a build without -ldflags reports, with its commit after a "+".
const release = "0.1.0"

// buildInfo is what `ipvsctl version` reports.
type buildInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Go      string `json:"go"`
}

// currentBuild fills what -ldflags did not stamp from what the Go toolchain
// recorded (a plain go build in a checkout records the commit).
func currentBuild() buildInfo {
	b := buildInfo{Version: version, Commit: commit, Go: runtime.Version()}
	if b.Commit == "" {
		if info, ok := debug.ReadBuildInfo(); ok {
			for _, s := range info.Settings {
				if s.Key == "vcs.revision" && len(s.Value) >= 12 {
					b.Commit = s.Value[:12]
				}
			}
		}
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	if b.Version == "" {
		b.Version = release + "+" + b.Commit
	}
	return b
}

func runVersion(env *cliEnv, args []string) int {
	fs, _ := env.newFlagSet("version", "[--json]", "Print ipvsctl's version, the commit it was built from and the Go version that built it.")
	asJSON := fs.Bool("json", false, "print JSON")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		return env.fail("version", fmt.Errorf("unexpected argument %q", fs.Arg(0)), true)
	}
	b := currentBuild()
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(b)
		return exitOK
	}
	fmt.Fprintf(env.stdout, "ipvsctl %s (commit %s, %s)\n", b.Version, b.Commit, b.Go)
	return exitOK
}
