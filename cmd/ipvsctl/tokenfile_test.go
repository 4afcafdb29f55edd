package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/servertest"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// A token given as a file (--token-file, --peer-token-file) stays out of
// the process's command line: it is read once, its line end dropped, from
// a regular file only its owner may read; any other is refused, naming the
// flag and the file, with exit status 2.
func TestTokenFiles(t *testing.T) {
	g := servertest.Start(t)
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("viewer.token", g.Tokens[auth.Viewer]+"\n", 0o600)
	if r := runCLI(t, nil, "status", "--server", g.URL, "--token-file", good); r.code != 0 {
		t.Fatalf("status --token-file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, nil, "status", "--server", g.URL, "--token-file", write("wrong.token", "ipvsctl_00000000_"+strings.Repeat("x", 43)+"\n", 0o600)); r.code == 0 {
		t.Fatalf("status with a wrong token in the file: exit 0\n%s", r.stdout)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	open := write("open.token", g.Tokens[auth.Viewer]+"\n", 0o644)
	for _, tc := range []struct{ path, want string }{
		{open, "mode 0644 lets its group or others at it"},
		{fifo, "not a regular file"},
		{filepath.Join(dir, "absent"), "no such file"},
	} {
		r := runCLI(t, nil, "status", "--server", g.URL, "--token-file", tc.path)
		if r.code != exitUsage || !strings.Contains(r.stderr, "token-file") || !strings.Contains(r.stderr, tc.path) || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("--token-file %s: exit %d, %q; want 2 naming the flag, the file and %q", tc.path, r.code, r.stderr, tc.want)
		}
	}

	db := filepath.Join(t.TempDir(), "ipvsctl.db")
	peer := write("peer.token", "ipvsctl_0123abcd_"+strings.Repeat("p", 43)+"\n", 0o600)
	if r := runCLI(t, nil, "--db", db, "node", "set", "--peer-url", "http://127.0.0.1:1", "--peer-token-file", peer); r.code != 0 {
		t.Fatalf("node set --peer-token-file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, nil, "--db", db, "node", "set", "--peer-token-file", open); r.code != exitUsage || !strings.Contains(r.stderr, "peer-token-file") {
		t.Errorf("node set --peer-token-file of a file others read: exit %d %q", r.code, r.stderr)
	}
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n, err := st.Node(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := "ipvsctl_0123abcd_" + strings.Repeat("p", 43); n.PeerToken != want {
		t.Errorf("peer token kept = %q, want %q (the file's line, its line end dropped)", n.PeerToken, want)
	}
}
