package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
)

// An import says what it read, a dry run changes nothing and prints the
// diff, an empty import does not wipe a stored state without --allow-empty,
// keepalived's includes are read from the importing file's directory.
func TestImportNothingLost(t *testing.T) {
	k := fakekernel.New()
	db := filepath.Join(t.TempDir(), "ipvsctl.db")
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("conf.d/web.conf", "virtual_server group WEB {\n  lb_kind DR\n  protocol TCP\n  real_server 198.18.1.1 80 {\n  }\n  real_server 198.18.1.2 8080 {\n  }\n}\n")
	main := write("keepalived.conf", "global_defs {\n  router_id a\n}\nvirtual_server_group WEB {\n  198.18.0.1-3 80\n}\ninclude conf.d/*.conf\n")

	r := runCLI(t, k, "--db", db, "import", "--format", "keepalived", "--dry-run", main)
	if r.code != 0 || !strings.Contains(r.stderr, "read "+main+": 3 virtual services, 6 real servers, 1 kept") ||
		!strings.Contains(r.stderr, "warning: keepalived "+filepath.Join(dir, "conf.d/web.conf")+" line 6: ") ||
		!strings.Contains(r.stdout, "dry run: the import would make") {
		t.Fatalf("dry run: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if len(k.Ops()) != 0 {
		t.Fatal("a dry run touched the kernel")
	}
	if r = runCLI(t, k, "--db", db, "export", "--format", "ipvsadm"); r.stdout != "" {
		t.Fatalf("a dry run stored something:\n%s", r.stdout)
	}
	r = runCLI(t, k, "--db", db, "import", "--format", "keepalived", main)
	if r.code != 0 || !strings.Contains(r.stdout, "9 changes applied, 0 failed") {
		t.Fatalf("import: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, k, "--db", db, "export", "--format", "ipvsadm")
	if strings.Count(r.stdout, "-A -t 198.18.0.") != 3 || strings.Count(r.stdout, ":80 -g -w 1") != 6 {
		t.Fatalf("export after the import:\n%s", r.stdout)
	}
	// Back to keepalived: the group is a group again, and imports to the
	// same state (no change to apply).
	r = runCLI(t, k, "--db", db, "export", "--format", "keepalived")
	if r.code != 0 || !strings.Contains(r.stdout, "virtual_server_group WEB {\n    198.18.0.1 80\n    198.18.0.2 80\n    198.18.0.3 80\n}") ||
		!strings.Contains(r.stdout, "virtual_server group WEB {") {
		t.Fatalf("export --format keepalived: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	back := write("back.conf", r.stdout)
	r = runCLI(t, k, "--db", db, "import", "--format", "keepalived", "--dry-run", back)
	if r.code != 0 || !strings.Contains(r.stdout, "dry run: the stored state would not change") {
		t.Fatalf("re-import of the keepalived export: %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	empty := write("empty.conf", "global_defs {\n}\n")
	r = runCLI(t, k, "--db", db, "import", "--format", "keepalived", empty)
	if r.code != 2 || !strings.Contains(r.stderr, "would remove all 3 stored ones (--allow-empty") {
		t.Fatalf("empty import over a state with services: %d\n%s", r.code, r.stderr)
	}
	r = runCLI(t, k, "--db", db, "import", "--format", "keepalived", "--allow-empty", "--no-apply", empty)
	if r.code != 0 {
		t.Fatalf("--allow-empty: %d\n%s", r.code, r.stderr)
	}

	typo := write("typo.conf", "virtual_server 198.18.0.1 80 {\n  protocol TCP\n  real_server 198.18.1.1 80 {\n    weigth 1\n  }\n}\n")
	r = runCLI(t, k, "--db", db, "import", "--format", "keepalived", typo)
	if r.code != 2 || !strings.Contains(r.stderr, `line 4: unknown keyword "weigth"`) {
		t.Fatalf("typo: %d\n%s", r.code, r.stderr)
	}
	r = runCLI(t, k, "--db", db, "import", "--format", "keepalived", "--ignore-unknown", "--no-apply", typo)
	if r.code != 0 || !strings.Contains(r.stderr, `ignored (--ignore-unknown): keepalived line 4: unknown keyword "weigth"`) {
		t.Fatalf("--ignore-unknown: %d\n%s", r.code, r.stderr)
	}

	// --config-id picks keepalived's @ID lines; definitions are replaced.
	cond := write("cond.conf", "$VIP=198.18.0.7\nvirtual_server ${VIP} 80 {\n  protocol TCP\n"+
		"@lb1  real_server 198.18.1.1 80 {\n@lb1  }\n@^lb1 real_server 198.18.1.2 80 {\n@^lb1 }\n}\n")
	for id, want := range map[string]string{"lb1": "198.18.1.1", "lb2": "198.18.1.2"} {
		r = runCLI(t, k, "--db", db, "import", "--format", "keepalived", "--config-id", id, "--no-apply", cond)
		if r.code != 0 || !strings.Contains(r.stderr, "1 virtual services, 1 real servers") {
			t.Fatalf("--config-id %s: %d\n%s", id, r.code, r.stderr)
		}
		r = runCLI(t, k, "--db", db, "rs", "list", "--json")
		if r.code != 0 || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "198.18.0.7") {
			t.Fatalf("--config-id %s: want real server %s of 198.18.0.7: %s%s", id, want, r.stdout, r.stderr)
		}
	}
}

// ldirectord.cf through the CLI: import with its report, export back, and
// a key ldirectord does not know refused at its line unless --ignore-unknown.
func TestImportLdirectord(t *testing.T) {
	k := fakekernel.New()
	db := filepath.Join(t.TempDir(), "ipvsctl.db")
	dir := t.TempDir()
	cf := filepath.Join(dir, "ldirectord.cf")
	doc := "checktimeout=3\nquiescent=yes\nvirtual=198.18.0.1:80\n\treal=198.18.0.11:80 gate 2\n\treal=198.18.0.12:80 gate\n\tservice=http\n\trequest=\"alive\"\n\treceive=\"ok\"\n\tscheduler=wlc\n\temailalert=\"ops@example.org\"\n"
	if err := os.WriteFile(cf, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, k, "--db", db, "import", "--format", "ldirectord", cf)
	if r.code != 0 || !strings.Contains(r.stderr, "read "+cf+": 1 virtual services, 2 real servers, 1 kept") {
		t.Fatalf("import: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, k, "--db", db, "export", "--format", "ldirectord")
	for _, want := range []string{"virtual=198.18.0.1:80\n", "    real=198.18.0.11:80 gate 2\n", "    service=http\n", "    request=\"alive\"\n",
		"    receive=\"ok\"\n", "    scheduler=wlc\n", "    quiescent=yes\n", "    emailalert=\"ops@example.org\"\n"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Fatalf("export --format ldirectord lacks %q: %d\n%s%s", want, r.code, r.stdout, r.stderr)
		}
	}
	typo := filepath.Join(dir, "typo.cf")
	if err := os.WriteFile(typo, []byte(doc+"\tcolor=blue\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, k, "--db", db, "import", "--format", "ldirectord", typo)
	if r.code != 2 || !strings.Contains(r.stderr, "ldirectord line 11: unknown key color=blue") {
		t.Fatalf("unknown key: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, k, "--db", db, "import", "--format", "ldirectord", "--ignore-unknown", "--no-apply", typo)
	if r.code != 0 || !strings.Contains(r.stderr, "line 11") {
		t.Fatalf("--ignore-unknown: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// A keepalived director's file through the CLI: its vrrp_instance's
// priority becomes this director's own (the report says so); the export
// writes it back.
func TestImportKeepalivedPriority(t *testing.T) {
	k := fakekernel.New()
	db := filepath.Join(t.TempDir(), "ipvsctl.db")
	cf := filepath.Join(t.TempDir(), "keepalived.conf")
	doc := "vrrp_instance VI_1 {\n  interface eth0\n  virtual_router_id 51\n  priority 120\n  virtual_ipaddress {\n    198.18.0.1\n  }\n}\n" +
		"virtual_server 198.18.0.1 80 {\n  lb_kind DR\n  protocol TCP\n  real_server 198.18.0.11 80 {\n  }\n}\n"
	if err := os.WriteFile(cf, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, k, "--db", db, "import", "--format", "keepalived", "--no-apply", cf)
	if r.code != 0 || !strings.Contains(r.stderr, "node: priority 120, role auto (keepalived line 1)") {
		t.Fatalf("import: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = runCLI(t, k, "--db", db, "node", "show", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"priority": 120`) {
		t.Fatalf("node after the import: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, k, "--db", db, "export", "--format", "keepalived")
	for _, want := range []string{"vrrp_instance VI_1 {", "priority 120", "virtual_router_id 51", "198.18.0.1\n"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Fatalf("export lacks %q: %d\n%s%s", want, r.code, r.stdout, r.stderr)
		}
	}
}
