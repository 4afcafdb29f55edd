package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// dirState is every file of a directory with its size, time and content hash.
func dirState(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(p)
		lines = append(lines, fmt.Sprintf("%s %d %s %x", e.Name(), fi.Size(), fi.ModTime().Format("15:04:05.000000000"), sha256.Sum256(b)))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// With --server (or IPVSCTL_SERVER) pointing at an address nobody listens
// on, every verb and sub-verb of the command table, run with its example
// from the table, fails with a connection error (it calls the core over
// the API), refuses saying where it runs, or runs without a database at
// all; the local database is never touched.
func TestNoVerbWritesTheLocalDatabaseWithServer(t *testing.T) {
	work := t.TempDir()
	t.Chdir(work) // the examples' files: state.json, lvs.cf
	for name, body := range map[string]string{"state.json": webDoc, "lvs.cf": "serial_no = 1\nprimary = 198.18.0.1\nservice = lvs\nnetwork = direct\n"} {
		if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dbDir := t.TempDir()
	db := filepath.Join(dbDir, "ipvsctl.db")
	seedAccounts(t, db)
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	core := server.New(server.Config{Store: st, Auth: auth.New(st, auth.Config{Params: auth.CheapParams()})})
	if _, err := core.Apply(ctx, server.Actor{Name: "seed", Via: "test"}, strings.NewReader(webDoc), "seed", server.WriteOptions{NoApply: true}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	before := dirState(t, dbDir)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := "http://" + ln.Addr().String()
	ln.Close()

	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	seen := map[runsOn]int{}
	for _, name := range names {
		cmd := cmds[name]
		subs := cmd.subs
		if len(subs) == 0 {
			subs = []string{""}
		}
		for _, sub := range subs {
			line := strings.TrimSpace(name + " " + sub)
			where := cmd.where[sub]
			example := cmd.examples[sub]
			if example == "" && where != anywhere {
				t.Errorf("ipvsctl %s: no example in the command table to run it with", line)
				continue
			}
			args := strings.Fields(example)
			if example == "" {
				args = strings.Fields(line)
			}
			if !strings.HasPrefix(strings.Join(args, " ")+" ", line+" ") {
				t.Errorf("ipvsctl %s: its example %q is another verb's", line, example)
				continue
			}
			seen[where]++
			for _, how := range []string{"--server", "IPVSCTL_SERVER"} {
				vars := map[string]string{"USER": "alice", "IPVSCTL_DB": db, "IPVSCTL_TOKEN": "ipvsctl_00000000_x"}
				argv := args
				if how == "--server" {
					argv = append([]string{"--server", nobody}, args...)
				} else {
					vars["IPVSCTL_SERVER"] = nobody
				}
				withStdin(t, "a long enough password\n")
				var out, errb bytes.Buffer
				code := dispatch(&cliEnv{stdout: &out, stderr: &errb, stdin: strings.NewReader(""), getenv: func(k string) string { return vars[k] }}, argv)
				r := cliRun{code, out.String(), errb.String()}
				switch where {
				case viaCore:
					if r.code != exitFail || !strings.Contains(r.stderr, "ipvsctl daemon at "+nobody) || !strings.Contains(r.stderr, "connection refused") {
						t.Errorf("ipvsctl %s (%s): want a connection error (exit 1), got %d\n%s%s", strings.Join(args, " "), how, r.code, r.stdout, r.stderr)
					}
				case onDirector, onRealServer, overSSH:
					if r.code != exitUsage || !strings.Contains(r.stderr, "ipvsctl "+line+": runs on the") || !strings.Contains(r.stderr, "without --server and IPVSCTL_SERVER") {
						t.Errorf("ipvsctl %s (%s): want a refusal saying where it runs (exit 2), got %d\n%s%s", strings.Join(args, " "), how, r.code, r.stdout, r.stderr)
					}
				case anywhere:
					if r.code != exitOK {
						t.Errorf("ipvsctl %s (%s): runs anywhere, got %d\n%s%s", strings.Join(args, " "), how, r.code, r.stdout, r.stderr)
					}
				}
				if after := dirState(t, dbDir); after != before {
					t.Fatalf("ipvsctl %s (%s) touched the local database:\nbefore\n%s\nafter\n%s", strings.Join(args, " "), how, before, after)
				}
			}
		}
	}
	if seen[viaCore] < 30 || seen[onDirector] < 2 || seen[onRealServer] < 1 || seen[anywhere] < 5 {
		t.Errorf("verbs walked by where they run: %v", seen)
	}
}

// Each verb's example from the command table is in its help and in the man page.
func TestHelpAndManShowTheExamples(t *testing.T) {
	var man bytes.Buffer
	cmds := commands()
	writeMan(&man, cmds, "test")
	n := 0
	for _, name := range visibleVerbs(cmds) {
		for sub, ex := range cmds[name].examples {
			args := []string{"help", name}
			if sub != "" {
				args = append(args, sub)
			}
			r := runCLI(t, nil, args...)
			if r.code != 0 || !strings.Contains(r.stdout, "\nexample: ipvsctl "+ex+"\n") {
				t.Errorf("ipvsctl %s: %d, no example %q:\n%s", strings.Join(args, " "), r.code, ex, r.stdout)
			}
			if !strings.Contains(man.String(), roff("ipvsctl "+ex)) {
				t.Errorf("the man page lacks the example %q", ex)
			}
			n++
		}
	}
	if n < 35 {
		t.Errorf("%d examples", n)
	}
}
