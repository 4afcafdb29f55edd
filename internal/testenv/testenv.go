// Package testenv is how a test says it cannot run here. Every skip in the
// project goes through it (TestNoRawSkips checks), so that a tier-2 (root,
// host kernel) or VM test cannot vanish silently: on a developer's machine
// it skips, under CI it fails.
package testenv

import (
	"fmt"
	"os"
	"testing"
)

// StrictVar is the variable that turns every Need into a failure; CI=true
// does too (.ci/run sets both).
const StrictVar = "IPVSCTL_STRICT_SKIPS"

// Strict says whether a missing environment fails the test: under CI.
func Strict() bool {
	return os.Getenv(StrictVar) == "1" || os.Getenv("CI") == "true"
}

// Need stops a test whose environment is missing: root, a tool, a browser,
// a kernel feature. It skips, or under CI (Strict) fails, saying why.
func Need(t testing.TB, why string) {
	t.Helper()
	if Strict() {
		t.Fatalf("cannot run under CI (%s=1 or CI=true): %s", StrictVar, why)
	}
	t.Skip(why)
}

// Needf is Need with a format.
func Needf(t testing.TB, format string, args ...any) {
	t.Helper()
	Need(t, fmt.Sprintf(format, args...))
}

// OptIn skips a test that runs only when asked for: a measurement behind a
// variable, a refresh of testdata behind a flag, the child half of a test
// that starts this binary again, a -short run. It never fails.
func OptIn(t testing.TB, why string) {
	t.Helper()
	t.Skip("opt-in: " + why)
}

// Elsewhere skips a case that another test runs where the environment has
// what it needs (the VM tier's kernel, say): by names that test. It never
// fails; the named test does, if the case breaks.
func Elsewhere(t testing.TB, by, why string) {
	t.Helper()
	t.Skipf("%s (run by %s)", why, by)
}
