package main

import (
	"runtime"
	"testing"
)

// TestServeProcs: the daemon runs with two Ps where Go takes one, keeps
// more where Go takes more, and keeps what GOMAXPROCS says when it is set.
func TestServeProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, c := range []struct {
		procs int
		env   string
		want  int
	}{{1, "", 2}, {1, "1", 1}, {3, "", 3}} {
		runtime.GOMAXPROCS(c.procs)
		serveProcs(func(k string) string {
			if k == "GOMAXPROCS" {
				return c.env
			}
			return ""
		})
		if got := runtime.GOMAXPROCS(0); got != c.want {
			t.Errorf("Go's GOMAXPROCS %d, the variable %q: the daemon runs with %d Ps, want %d", c.procs, c.env, got, c.want)
		}
	}
}
