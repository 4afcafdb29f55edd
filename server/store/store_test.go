package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/migrations"
)

func openTemp(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sub", "ipvsctl.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func TestOpenCreatesPrivateFileAndMigrates(t *testing.T) {
	s, path := openTemp(t)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("database mode %v, want 0600", fi.Mode().Perm())
	}
	all, _ := migrations.All()
	if v, err := s.SchemaVersion(context.Background()); err != nil || v != len(all) {
		t.Fatalf("schema version %d (%v), want %d", v, err, len(all))
	}
	var mode string
	s.db.QueryRow(`PRAGMA journal_mode`).Scan(&mode)
	if mode != "wal" {
		t.Errorf("journal mode %q, want wal", mode)
	}
}

// Every older schema (each prefix of the migrations) is brought up to date.
func TestMigrateFromEachOlderSchema(t *testing.T) {
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k <= len(all); k++ {
		// Build the schema as an ipvsctl that knew only the first k migrations left it.
		path := filepath.Join(t.TempDir(), "db")
		old, err := Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := old.db.Exec(`DROP TABLE revisions; DROP TABLE ledger; DROP TABLE health_current; DROP TABLE health_transitions; DELETE FROM schema_migrations`); err != nil {
			t.Fatal(err)
		}
		if err := old.migrateTo(context.Background(), all[:k]); err != nil {
			t.Fatalf("build schema %d: %v", k, err)
		}
		old.Close()
		s, err := Open(context.Background(), path)
		if err != nil {
			t.Fatalf("open schema %d: %v", k, err)
		}
		if v, _ := s.SchemaVersion(context.Background()); v != len(all) {
			t.Fatalf("from schema %d reached %d, want %d", k, v, len(all))
		}
		if _, _, err := s.Commit(context.Background(), 0, &ipvsmgr.State{}, "t", "test", "first"); err != nil {
			t.Fatalf("schema %d: commit after migration: %v", k, err)
		}
		s.Close()
	}
}

// What an ipvsctl at schema 1 stored (revisions with a state hash, a ledger
// with its keys as objects) is all there after the upgrade.
func TestSchema1DataSurvivesUpgrade(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db")
	old, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := migrations.All()
	if _, err := old.db.Exec(`DROP TABLE revisions; DROP TABLE ledger; DROP TABLE health_current; DROP TABLE health_transitions; DELETE FROM schema_migrations`); err != nil {
		t.Fatal(err)
	}
	if err := old.migrateTo(ctx, all[:1]); err != nil {
		t.Fatal(err)
	}
	doc, _ := Encode(webState(2))
	if _, err := old.db.Exec(`INSERT INTO revisions (created_at, author, via, summary, state, state_hash) VALUES
		('2026-11-29T10:00:00Z', 'alice', 'cli', 'add web', ?, 'c0ffee')`, string(doc)); err != nil {
		t.Fatal(err)
	}
	if _, err := old.db.Exec(`INSERT INTO ledger (id, data) VALUES (1, '{"services":[{"Family":2,"Protocol":6,"Addr":"198.18.0.100","Port":80,"FWMark":0}],"vips":null,"drains":null,"marks":false}')`); err != nil {
		t.Fatal(err)
	}
	old.Close()

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, rev, err := s.Current(ctx)
	if err != nil || rev != 1 || len(st.Services) != 1 || len(st.Services[0].Servers) != 2 {
		t.Fatalf("current after upgrade: rev %d, %+v, %v", rev, st, err)
	}
	h, err := s.History(ctx, 10)
	if err != nil || len(h) != 1 || h[0].Author != "alice" || h[0].Summary != "add web" {
		t.Fatalf("history after upgrade: %+v, %v", h, err)
	}
	l, err := s.LoadLedger(ctx)
	if err != nil || len(l.Services) != 1 || l.Services[0].String() != "-t 198.18.0.100:80" {
		t.Fatalf("ledger after upgrade: %+v, %v", l, err)
	}
	if rev, changed, err := s.Commit(ctx, 1, webState(2), "bob", "cli", "same"); err != nil || rev != 1 || changed {
		t.Fatalf("the same state again: rev %d changed %v err %v", rev, changed, err)
	}
	if rev, changed, err := s.Commit(ctx, 1, webState(3), "bob", "cli", "add r3"); err != nil || rev != 2 || !changed {
		t.Fatalf("a new state: rev %d changed %v err %v", rev, changed, err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	s, path := openTemp(t)
	if _, err := s.db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 'x')`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := Open(context.Background(), path)
	if !errors.Is(err, ErrSchemaNewer) {
		t.Fatalf("want ErrSchemaNewer, got %v", err)
	}
	t.Logf("message: %v", err)
}

func webState(servers int) *ipvsmgr.State {
	st := &ipvsmgr.State{Services: []ipvsmgr.Service{{Name: "web", Address: "198.18.0.100", Port: 80}}}
	for i := range servers {
		st.Services[0].Servers = append(st.Services[0].Servers, ipvsmgr.Server{Address: fmt.Sprintf("198.18.0.%d", 11+i)})
	}
	return st
}

func TestCommitStaleAndUnchanged(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	rev, changed, err := s.Commit(ctx, 0, webState(1), "alice", "cli", "add web")
	if err != nil || rev != 1 || !changed {
		t.Fatalf("first commit: rev %d changed %v err %v", rev, changed, err)
	}
	if rev, changed, err := s.Commit(ctx, 1, webState(1), "alice", "cli", "same"); err != nil || rev != 1 || changed {
		t.Fatalf("identical state made a revision: rev %d changed %v err %v", rev, changed, err)
	}
	if _, _, err := s.Commit(ctx, 1, webState(2), "bob", "api", "add r2"); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Commit(ctx, 1, webState(3), "carol", "panel", "based on 1")
	var stale *StaleError
	if !errors.As(err, &stale) || stale.Base != 1 || stale.Current != 2 {
		t.Fatalf("stale write not refused: %v", err)
	}
	st, cur, _ := s.Current(ctx)
	if cur != 2 || len(st.Services[0].Servers) != 2 {
		t.Fatalf("stale write changed the state: rev %d, %d servers", cur, len(st.Services[0].Servers))
	}
	hist, _ := s.History(ctx, 10)
	if len(hist) != 2 || hist[0].Author != "bob" || hist[0].Via != "api" || hist[1].Summary != "add web" {
		t.Fatalf("history = %+v", hist)
	}
	r, err := s.Revision(ctx, 1)
	if err != nil || len(r.State.Services[0].Servers) != 1 {
		t.Fatalf("revision 1: %+v %v", r, err)
	}
	if _, err := s.Revision(ctx, 42); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing revision: %v", err)
	}
}

// Concurrent writers (separate connections, as separate processes would be)
// never lose an update and never see "database is locked".
func TestConcurrentWritersLoseNothing(t *testing.T) {
	_, path := openTemp(t)
	const writers, each = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(context.Background(), path)
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			for i := range each {
				_, _, err := s.Update(context.Background(), fmt.Sprintf("w%d", w), "cli", func(st *ipvsmgr.State) (string, error) {
					if len(st.Services) == 0 {
						st.Services = []ipvsmgr.Service{{Name: "web", Address: "198.18.0.100", Port: 80}}
					}
					st.Services[0].Servers = append(st.Services[0].Servers, ipvsmgr.Server{Address: fmt.Sprintf("198.18.%d.%d", w+1, i+1)})
					return "add server", nil
				})
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, rev, _ := s.Current(context.Background())
	if n := len(st.Services[0].Servers); n != writers*each || rev != writers*each {
		t.Fatalf("%d servers at revision %d, want %d", n, rev, writers*each)
	}
}

func TestLedgerRoundTrip(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	if l, err := s.LoadLedger(ctx); err != nil || len(l.Services) != 0 {
		t.Fatalf("empty ledger: %+v %v", l, err)
	}
	want := &ipvsmgr.Ledger{VIPs: []ipvsmgr.VIP{{Interface: "eth0"}}, Marks: true}
	if err := s.SaveLedger(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadLedger(ctx)
	if err != nil || len(got.VIPs) != 1 || !got.Marks {
		t.Fatalf("ledger = %+v %v", got, err)
	}
}

// The store compares documents byte for byte: its encoding must be exactly
// json.Marshal's, whichever way a state was built.
func TestEncodeIsJSONMarshal(t *testing.T) {
	w := 3
	big := webState(0)
	for i := range 600 { // enough to encode on several goroutines
		big.Services = append(big.Services, ipvsmgr.Service{Name: fmt.Sprintf("s%d", i), Address: "198.18.0.1", Port: 1 + i})
	}
	for _, st := range []*ipvsmgr.State{
		big,
		{},
		{Services: []ipvsmgr.Service{}},
		webState(2),
		{Settings: ipvsmgr.Settings{Network: "nat"}, Services: []ipvsmgr.Service{{Name: "a<&>", Servers: []ipvsmgr.Server{{Address: "198.18.0.1", Weight: &w}}}, {FWMark: 3}},
			Imported: []ipvsmgr.ImportedKey{{Source: "lvs.cf", Line: 3, Key: "send", Value: "GET / \"x\"\n"}}},
	} {
		want, _ := json.Marshal(st)
		got, svcs, err := EncodeServices(st)
		if err != nil || string(got) != string(want) {
			t.Fatalf("EncodeServices = %s (%v)\njson.Marshal = %s", got, err, want)
		}
		for i := range st.Services {
			b, _ := json.Marshal(&st.Services[i])
			if string(svcs[i]) != string(b) {
				t.Fatalf("service %d encoded as %s, want %s", i, svcs[i], b)
			}
		}
	}
}

// Only the newest revision keeps the whole document; every older one comes
// back exactly from its reverse delta, and the history of many one-weight
// changes to a large state costs little more than one document.
func TestHistoryKeptAsReverseDeltas(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	st := &ipvsmgr.State{Settings: ipvsmgr.Settings{Network: "dr"}, Services: []ipvsmgr.Service{}}
	for i := range 300 {
		svc := ipvsmgr.Service{Name: fmt.Sprintf("s%d", i), Address: fmt.Sprintf("198.18.%d.%d", 100+i/250, 1+i%250), Port: 80}
		for j := range 10 {
			svc.Servers = append(svc.Servers, ipvsmgr.Server{Address: fmt.Sprintf("198.18.0.%d", 11+j)})
		}
		st.Services = append(st.Services, svc)
	}
	var docs []string
	for rev := int64(1); rev <= 40; rev++ {
		switch {
		case rev == 20: // a service moved to the end and one removed
			st.Services = append(st.Services[2:], st.Services[0])
		case rev == 30:
			st.Imported = []ipvsmgr.ImportedKey{{Source: "lvs.cf", Line: 3, Key: "send", Value: "GET /"}}
		case rev > 1:
			w := int(rev)
			st.Services[int(rev)*7%len(st.Services)].Servers[3].Weight = &w
		}
		doc, _ := Encode(st)
		docs = append(docs, string(doc))
		if got, changed, err := s.Commit(ctx, rev-1, st, "t", "test", fmt.Sprintf("change %d", rev)); err != nil || got != rev || !changed {
			t.Fatalf("commit %d: rev %d changed %v err %v", rev, got, changed, err)
		}
	}
	for rev := int64(1); rev <= 40; rev++ {
		r, err := s.Revision(ctx, rev)
		if err != nil {
			t.Fatalf("revision %d: %v", rev, err)
		}
		if doc, _ := Encode(r.State); string(doc) != docs[rev-1] {
			t.Fatalf("revision %d read back differs", rev)
		}
	}
	var whole, deltas, stored int
	if err := s.db.QueryRow(`SELECT SUM(delta = 0), SUM(delta = 1), SUM(length(state)) FROM revisions`).Scan(&whole, &deltas, &stored); err != nil {
		t.Fatal(err)
	}
	if whole != 1 || deltas != 39 {
		t.Errorf("%d whole documents and %d deltas, want 1 and 39", whole, deltas)
	}
	if stored > 2*len(docs[0]) {
		t.Errorf("40 revisions take %d bytes; one document is %d", stored, len(docs[0]))
	}
	t.Logf("40 revisions of a %d-byte document take %d bytes", len(docs[0]), stored)
}
