package store

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp"
	"github.com/ipvsctl/ipvsctl/migrations"
)

// The keys of an old database: three revisions (a reverse delta, a whole
// document, a forward delta; the key rotated from alpha to beta), a draft
// with a third, a keepalived block kept with its auth_pass, and the
// rotation quoted in a summary and in the audit.
const (
	keyAlpha = "Pw-Old-Alpha-1"
	keyBeta  = "Pw-New-Beta-2"
	keyDraft = "Pw-Draft-Gamma-3"
	authPass = "KaAuthPass9"
)

func legacySettings(key string) string {
	return `{"tcp_timeout":0,"tcpfin_timeout":0,"udp_timeout":0,"bgp":{"asn":65001,"peers":[{"address":"198.18.0.1","asn":65000,"password":"` + key + `"}]}}`
}

const legacyService = `{"name":"web","protocol":"tcp","address":"198.18.0.100","port":80,"scheduler":"mh","servers":[{"name":"r1","address":"198.18.0.11","port":80}]}`

// seedLegacy builds a database as the ipvsctl before migration 0017 left it.
func seedLegacy(t *testing.T, path string) {
	t.Helper()
	ctx := context.Background()
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	old, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	dropSchema(t, old)
	if err := old.migrateTo(ctx, all[:16]); err != nil {
		t.Fatal(err)
	}
	imported := `,"imported":[{"source":"keepalived","line":3,"key":"vrrp_instance VI_1","value":"vrrp_instance VI_1 {\n authentication {\n auth_type PASS\n auth_pass ` + authPass + `\n }\n}"}]`
	rows := []struct {
		doc     string
		kind    int
		summary string
	}{
		{`{"settings":` + legacySettings(keyAlpha) + `,"services":[0]` + imported + `}`, kindReverse, "import keepalived.conf"},
		{`{"settings":` + legacySettings(keyBeta) + `,"services":[` + legacyService + `]` + imported + `}`, kindWhole, "settings.bgp.peers[0].password: " + keyAlpha + " -> " + keyBeta},
		{`{"settings":` + legacySettings(keyBeta) + `,"services":[0]}`, kindForward, "rs set web r1 --weight 1"},
	}
	for _, r := range rows {
		if _, err := old.db.ExecContext(ctx, `INSERT INTO revisions (created_at, author, via, summary, state, delta) VALUES ('2026-12-01T00:00:00Z', 'admin', 'api', ?, ?, ?)`, r.summary, r.doc, r.kind); err != nil {
			t.Fatal(err)
		}
	}
	draft := `{"settings":` + legacySettings(keyDraft) + `,"services":[` + legacyService + `]}`
	if _, err := old.db.ExecContext(ctx, `INSERT INTO panel_drafts (author, base, doc, updated_at) VALUES ('alice', 3, ?, '2026-12-01T00:00:00Z')`, draft); err != nil {
		t.Fatal(err)
	}
	if _, err := old.WriteAudit(ctx, AuditEntry{Actor: "admin", Via: "api", Action: "settings", Target: "settings", Outcome: OutcomeSuccess, Detail: "bgp peer password " + keyBeta}); err != nil {
		t.Fatal(err)
	}
	old.Close()
	raw := readDB(t, path)
	for _, k := range []string{keyAlpha, keyBeta, keyDraft, authPass} {
		if !bytes.Contains(raw, []byte(k)) {
			t.Fatalf("the seeded database lacks %q: the test would prove nothing", k)
		}
	}
}

// readDB is the database's bytes as they are on disk, its WAL too.
func readDB(t *testing.T, path string) []byte {
	t.Helper()
	var all []byte
	for _, p := range []string{path, path + "-wal", path + "-journal"} {
		b, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

func TestMigrationMovesBGPPasswordsToFilesAndScrubsEveryCopy(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ipvsctl.db")
	seedLegacy(t, path)

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	want := "moved 3 BGP passwords to files; scrubbed from 3 revisions and 1 drafts"
	if notes := s.MigrationNotes(); len(notes) != 1 || !strings.Contains(notes[0], want) {
		t.Errorf("migration notes %q, want %q", notes, want)
	}
	audit, err := s.Audit(ctx, AuditFilter{Action: "migrate"})
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != 1 || !strings.Contains(audit[0].Detail, want) || audit[0].Actor != "ipvsctl" {
		t.Errorf("audit of the migration: %+v", audit)
	}

	// The current state names the file of the current key; the speaker's
	// configuration reads it back.
	dir := SecretsDir(path)
	st, rev, err := s.Current(ctx)
	if err != nil || rev != 3 {
		t.Fatalf("current: rev %d, %v", rev, err)
	}
	peer := st.Settings.BGP.Peers[0]
	if peer.PasswordFile != filepath.Join(dir, "bgp-peer-198.18.0.1.key") || peer.LegacyPassword != "" {
		t.Errorf("current peer: file %q", peer.PasswordFile)
	}
	if _, err := ipvsmgr.Compile(st); err != nil {
		t.Errorf("the migrated current state is not valid: %v", err)
	}
	pw, err := bgp.ReadPasswords("settings.bgp", *st.Settings.BGP)
	if err != nil {
		t.Fatal(err)
	}
	if got := (bgp.Config{Settings: *st.Settings.BGP, Passwords: pw}).Password(peer); got != keyBeta {
		t.Errorf("the speaker would get key %q, want the one the document had", got)
	}
	fileKey := func(f string) string {
		t.Helper()
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %04o, want 0600", f, fi.Mode().Perm())
		}
		k, err := bgp.ReadPasswordFile(f)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	// An old revision keeps its own key, in its own file: a rollback to it
	// still speaks with the key it had.
	r1, err := s.Revision(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if f := r1.State.Settings.BGP.Peers[0].PasswordFile; fileKey(f) != keyAlpha || f == peer.PasswordFile {
		t.Errorf("revision 1's password_file %q", f)
	}
	if len(r1.State.Services) != 1 || r1.State.Services[0].Name != "web" {
		t.Errorf("revision 1's services (a reverse delta) did not survive: %+v", r1.State.Services)
	}
	if v := r1.State.Imported[0].Value; strings.Contains(v, authPass) || !strings.Contains(v, "auth_type PASS") {
		t.Errorf("revision 1's kept block: %q", v)
	}
	d, err := s.Draft(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	dst, err := ipvsmgr.DecodeState(bytes.NewReader(d.Doc))
	if err != nil {
		t.Fatal(err)
	}
	if f := dst.Settings.BGP.Peers[0].PasswordFile; fileKey(f) != keyDraft {
		t.Errorf("the draft's password_file %q", f)
	}
	hist, err := s.History(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 3 || !strings.Contains(hist[1].Summary, ipvsmgr.SecretNotKept) {
		t.Errorf("history after the migration: %+v", hist)
	}
	s.Close()

	raw := readDB(t, path)
	for _, k := range []string{keyAlpha, keyBeta, keyDraft, authPass} {
		if i := bytes.Index(raw, []byte(k)); i >= 0 {
			t.Errorf("%q is still in the database file at byte %d", k, i)
		}
	}

	// Opened again: nothing more to move, no second record.
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if notes := s.MigrationNotes(); notes != nil {
		t.Errorf("a second open said %q", notes)
	}
	if a, _ := s.Audit(ctx, AuditFilter{Action: "migrate"}); len(a) != 1 {
		t.Errorf("%d migration records after a second open", len(a))
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "*")); len(names) != 3 {
		t.Errorf("secret files: %q, want 3", names)
	}
}

// The migration without its VACUUM leaves keys in the file's free space:
// the raw read of the test above is what sees a missing VACUUM.
func TestMigrationWithoutVacuumWouldLeaveKeys(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ipvsctl.db")
	seedLegacy(t, path)
	all, _ := migrations.All()
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	s := &Store{db: db, path: path, secretsDir: SecretsDir(path)}
	if err := s.migrateTo(ctx, all); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	left := 0
	raw := readDB(t, path)
	for _, k := range []string{keyAlpha, keyBeta, keyDraft, authPass} {
		if bytes.Contains(raw, []byte(k)) {
			left++
		}
	}
	t.Logf("without VACUUM, %d of 4 secrets are still in the file's free space", left)
	if left == 0 {
		t.Error("without VACUUM no key was left: the raw read proves nothing of the VACUUM")
	}
}
