// Package store keeps the desired cluster state in SQLite: the one source of
// truth that the CLI, the API and the panel write, with every change kept as
// a revision.
package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/migrations"
)

var (
	// ErrNotFound means no such revision.
	ErrNotFound = errors.New("not found")
	// ErrSchemaNewer means the database was written by a newer ipvsctl.
	ErrSchemaNewer = errors.New("database schema is newer than this ipvsctl")
	// ErrBusy means another writer held the database longer than the busy timeout.
	ErrBusy = errors.New("the state database stayed busy for 10 s (another ipvsctl is writing); try again")
	// ErrDiskFull means SQLite could not write for want of space: nothing
	// of the write was stored.
	ErrDiskFull = errors.New("the state database's filesystem is full: nothing was stored; free space there and try again")
	// ErrCorrupt means the database file is not a readable SQLite database
	// (damaged, truncated, or another kind of file).
	ErrCorrupt = errors.New("the state database is damaged")
)

// StaleError refuses a write based on a revision that is no longer current.
type StaleError struct {
	Base, Current int64
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("the desired state changed since revision %d (now at revision %d): reload it and make the change again", e.Base, e.Current)
}

// Store is the state database.
type Store struct {
	db   *sql.DB
	path string
	// secretsDir is where migration 0017 writes the keys it moves out of
	// the documents (SecretsDir); notes what the migrations said; vacuum
	// that one of them freed pages that held a secret.
	secretsDir string
	notes      []string
	vacuum     bool
}

// Open opens (creating it and its directory if needed, mode 0600) the state
// database at path and brings its schema up to date.
func Open(ctx context.Context, path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create database directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	f.Close()
	// A database made by something else, or before, may be readable by all:
	// it holds password hashes, the peer token and the audit record.
	if err := restrict(path); err != nil {
		return nil, err
	}
	dsn := "file:" + path + "?_busy_timeout=10000&_journal_mode=WAL&_foreign_keys=on&_txlock=immediate&_synchronous=NORMAL&_stmt_cache_size=64"
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	s := &Store{db: db, path: path, secretsDir: SecretsDir(path)}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		if !errors.Is(err, ErrCorrupt) {
			err = busy(err)
		}
		return nil, corruptAdvice(path, err)
	}
	for _, side := range []string{path + "-wal", path + "-shm"} {
		if err := restrict(side); err != nil && !errors.Is(err, fs.ErrNotExist) {
			db.Close()
			return nil, err
		}
	}
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

func (s *Store) migrate(ctx context.Context) error {
	// Every command opens the database: one that is up to date is only read,
	// without loading the migrations.
	v, err := s.SchemaVersion(ctx)
	if errors.Is(busy(err), ErrDiskFull) {
		// SQLite could not make the WAL's index beside the database: no
		// statement can run, so say that rather than which one failed first.
		return fmt.Errorf("open database %s: %w", s.path, ErrDiskFull)
	}
	if err != nil || v != migrations.Latest() {
		all, err := migrations.All()
		if err != nil {
			return err
		}
		if err := s.migrateTo(ctx, all); err != nil {
			return err
		}
	}
	if s.vacuum {
		// The pages a secret was on are free, not blank: VACUUM rewrites
		// the file without them, and the checkpoint empties the WAL.
		if _, err := s.db.ExecContext(ctx, `VACUUM`); err != nil {
			return fmt.Errorf("vacuum after the migration: %w", busy(err))
		}
		if _, err := s.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			return fmt.Errorf("checkpoint after the migration: %w", busy(err))
		}
		s.vacuum = false
	}
	return s.importResultsFile(ctx)
}

// migrateTo applies the migrations in all that the database lacks, each in
// its own transaction, and refuses a database that is ahead of all.
func (s *Store) migrateTo(ctx context.Context, all []migrations.Migration) error {
	// Every command opens the database: one that is up to date is only read.
	if v, err := s.SchemaVersion(ctx); err == nil && v == len(all) {
		return nil
	}
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`); err != nil {
		return fmt.Errorf("create schema table: %w", busy(err))
	}
	for {
		done, err := s.migrateOne(ctx, all)
		if err != nil || done {
			return err
		}
	}
}

func (s *Store) migrateOne(ctx context.Context, all []migrations.Migration) (done bool, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("migrate database: %w", busy(err))
	}
	defer tx.Rollback()
	var cur int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&cur); err != nil {
		return false, fmt.Errorf("read schema version: %w", busy(err))
	}
	if cur > len(all) {
		return false, fmt.Errorf("%w: %s is at schema version %d, this ipvsctl knows up to %d; upgrade ipvsctl", ErrSchemaNewer, s.path, cur, len(all))
	}
	if cur == len(all) {
		return true, nil
	}
	m := all[cur]
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return false, fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
	}
	if convert := s.conversions()[m.Version]; convert != nil {
		// A step the SQL cannot make (the documents' contents), in the same
		// transaction: a crash leaves the database before the step or after it.
		if err := convert(ctx, tx); err != nil {
			return false, fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.Version, m.Name, time.Now().UTC().Format(time.RFC3339)); err != nil {
		return false, fmt.Errorf("record migration %04d_%s: %w", m.Version, m.Name, err)
	}
	return false, tx.Commit()
}

// SchemaVersion is the number of migrations applied.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

// busy turns SQLite's lock, disk-full and corruption errors into ErrBusy,
// ErrDiskFull and ErrCorrupt, messages a user can act on.
func busy(err error) error {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code {
	case sqlite3.ErrBusy, sqlite3.ErrLocked:
		return ErrBusy
	case sqlite3.ErrFull:
		return ErrDiskFull
	case sqlite3.ErrIoErr, sqlite3.ErrCantOpen:
		// A full filesystem met while writing the WAL or its index.
		if se.SystemErrno == syscall.ENOSPC || se.SystemErrno == syscall.EDQUOT {
			return ErrDiskFull
		}
	case sqlite3.ErrCorrupt, sqlite3.ErrNotADB:
		return fmt.Errorf("%w (%w)", ErrCorrupt, err)
	}
	return err
}

// CorruptError is a damaged database and what to do about it.
type CorruptError struct {
	Path string
	Err  error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("%s: %v: nothing was changed in the kernel, which keeps serving its current table; "+
		"move the file aside and put back your last copy of it, or rebuild the desired state from the kernel's "+
		"table: ipvsadm -Sn | ipvsctl import --format ipvsadm --no-apply -", e.Path, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// corruptAdvice says what to do about a damaged database at path: the
// kernel's table is left as it is, and is where the desired state can be
// rebuilt from.
func corruptAdvice(path string, err error) error {
	var ce *CorruptError
	if !errors.Is(err, ErrCorrupt) || errors.As(err, &ce) {
		return err
	}
	return &CorruptError{Path: path, Err: err}
}

// Check reads the whole database (SQLite's quick_check): the daemon starts
// only on one that is sound, rather than fail on the first damaged page a
// request reaches.
func (s *Store) Check(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, `PRAGMA quick_check`)
	if err != nil {
		return corruptAdvice(s.path, fmt.Errorf("check database: %w", busy(err)))
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return corruptAdvice(s.path, fmt.Errorf("check database: %w", busy(err)))
		}
		if p != "ok" && len(problems) < 3 {
			problems = append(problems, p)
		}
	}
	if err := rows.Err(); err != nil {
		return corruptAdvice(s.path, fmt.Errorf("check database: %w", busy(err)))
	}
	if len(problems) > 0 {
		return corruptAdvice(s.path, fmt.Errorf("check database: %w (%s)", ErrCorrupt, strings.Join(problems, "; ")))
	}
	return nil
}

// Revision is one change of the desired state.
type Revision struct {
	ID      int64          `json:"id"`
	At      time.Time      `json:"at"`
	Author  string         `json:"author"`
	Via     string         `json:"via"`
	Summary string         `json:"summary"`
	State   *ipvsmgr.State `json:"state,omitempty"`
}

func decodeState(doc string) (*ipvsmgr.State, error) {
	st, err := ipvsmgr.DecodeState(strings.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("stored state: %w", err)
	}
	return st, nil
}

// Current returns the desired state and its revision (0 and an empty state
// before the first change).
func (s *Store) Current(ctx context.Context) (*ipvsmgr.State, int64, error) {
	id, doc, err := s.CurrentDocument(ctx)
	if err != nil {
		return nil, 0, corruptAdvice(s.path, err)
	}
	if doc == nil {
		return &ipvsmgr.State{Services: []ipvsmgr.Service{}}, 0, nil
	}
	st, err := decodeState(string(doc))
	return st, id, err
}

// CurrentDocument returns the current revision and its document as stored
// (compact JSON), without decoding it; nil before the first change.
func (s *Store) CurrentDocument(ctx context.Context) (int64, []byte, error) {
	var id int64
	var doc []byte
	var kind int
	err := s.db.QueryRowContext(ctx, `SELECT id, state, delta FROM revisions ORDER BY id DESC LIMIT 1`).Scan(&id, &doc, &kind)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("read desired state: %w", busy(err))
	}
	if kind == kindForward {
		if doc, err = forwardChain(ctx, s.db, id); err != nil {
			return 0, nil, fmt.Errorf("read desired state: %w", err)
		}
	}
	return id, doc, nil
}

// CurrentRevision returns the number of the current revision (0 if none).
func (s *Store) CurrentRevision(ctx context.Context) (int64, error) {
	var id int64
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM revisions`).Scan(&id)
	return id, busy(err)
}

// Commit stores st as the new desired state if the current revision is still
// base; otherwise it returns a *StaleError and stores nothing. A state equal
// to the current one makes no revision: it returns base and changed false.
func (s *Store) Commit(ctx context.Context, base int64, st *ipvsmgr.State, author, via, summary string) (rev int64, changed bool, err error) {
	doc, err := Encode(st)
	if err != nil {
		return 0, false, err
	}
	return s.CommitDocument(ctx, base, doc, nil, author, via, summary)
}

// Encode is a state as the store keeps it (compact JSON, as json.Marshal
// writes it); CommitDocument takes it, and CurrentDocument returns it.
func Encode(st *ipvsmgr.State) ([]byte, error) {
	doc, _, err := EncodeServices(st)
	return doc, err
}

// EncodeServices is Encode that also returns each service's encoding (a
// slice of the document), for comparing documents service by service.
func EncodeServices(st *ipvsmgr.State) (doc []byte, services [][]byte, err error) {
	services = make([][]byte, len(st.Services))
	for i := range st.Services {
		services[i] = ipvsmgr.EncodeService(&st.Services[i])
	}
	doc, err = JoinServices(st, services)
	return doc, services, err
}

// JoinServices is Encode for a state whose services are already encoded
// (services[i] for st.Services[i]).
func JoinServices(st *ipvsmgr.State, services [][]byte) ([]byte, error) {
	settings, err := json.Marshal(st.Settings)
	if err != nil {
		return nil, fmt.Errorf("encode settings: %w", err)
	}
	p := ipvsmgr.StoredParts{Settings: settings, Services: services, ServicesNull: st.Services == nil}
	if len(st.Imported) > 0 {
		if p.Imported, err = json.Marshal(st.Imported); err != nil {
			return nil, fmt.Errorf("encode imported keys: %w", err)
		}
	}
	return p.Join(), nil
}

// CommitDocument is Commit for a state already encoded with Encode.
// prevDelta, if not nil, is the base revision's document as a reverse delta
// against this one (ReverseDelta), made by a caller that has both split
// already (StoredState.ChangesTo); without it the store makes it.
func (s *Store) CommitDocument(ctx context.Context, base int64, docBytes, prevDelta []byte, author, via, summary string) (rev int64, changed bool, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, false, fmt.Errorf("store desired state: %w", busy(err))
	}
	defer tx.Rollback()
	rev, changed, err = commitTx(ctx, tx, base, docBytes, prevDelta, author, via, summary)
	if err != nil || !changed {
		return rev, changed, err
	}
	if err := tx.Commit(); err != nil {
		return 0, false, fmt.Errorf("store desired state: %w", busy(err))
	}
	return rev, true, nil
}

// commitTx is CommitDocument in tx.
func commitTx(ctx context.Context, tx *sql.Tx, base int64, docBytes, prevDelta []byte, author, via, summary string) (rev int64, changed bool, err error) {
	doc := string(docBytes)
	var cur int64
	var same bool
	var kind int
	err = tx.QueryRowContext(ctx, `SELECT id, state = ?, delta FROM revisions ORDER BY id DESC LIMIT 1`, doc).Scan(&cur, &same, &kind)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, false, fmt.Errorf("store desired state: %w", busy(err))
	}
	if cur != base {
		return 0, false, &StaleError{Base: base, Current: cur}
	}
	if kind == kindForward {
		// The current revision is a delta: compare with the document it
		// stands for. It stays a forward delta (the chain before it needs it).
		prev, err := forwardChain(ctx, tx, cur)
		if err != nil {
			return 0, false, fmt.Errorf("store desired state: %w", err)
		}
		same, prevDelta = string(prev) == doc, nil
	}
	if cur != 0 && same {
		return cur, false, nil
	}
	if cur != 0 && prevDelta == nil && kind == kindWhole {
		var prev string
		if err := tx.QueryRowContext(ctx, `SELECT state FROM revisions WHERE id = ?`, cur).Scan(&prev); err != nil {
			return 0, false, fmt.Errorf("store desired state: %w", busy(err))
		}
		// One not in the stored form (edited by hand) stays whole.
		prevDelta, _ = ReverseDelta([]byte(prev), docBytes)
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO revisions (created_at, author, via, summary, state) VALUES (?, ?, ?, ?, ?)`,
		time.Now().UTC().Format(time.RFC3339Nano), author, via, summary, doc)
	if err != nil {
		return 0, false, fmt.Errorf("store desired state: %w", busy(err))
	}
	// The revision before keeps only what this one does not have.
	if cur != 0 && prevDelta != nil && kind == kindWhole {
		if _, err := tx.ExecContext(ctx, `UPDATE revisions SET state = ?, delta = 1 WHERE id = ?`, string(prevDelta), cur); err != nil {
			return 0, false, fmt.Errorf("store desired state: %w", busy(err))
		}
	}
	rev, err = res.LastInsertId()
	return rev, err == nil, err
}

// Update applies change to the current state and commits the result; when
// another writer got in between it starts again from the new current state,
// so no update is lost. change is given the revision it changes and returns
// the summary of what it did.
func (s *Store) Update(ctx context.Context, author, via string, change func(st *ipvsmgr.State, base int64) (string, error)) (rev int64, changed bool, err error) {
	for attempt := 0; ; attempt++ {
		st, base, err := s.Current(ctx)
		if err != nil {
			return 0, false, err
		}
		summary, err := change(st, base)
		if err != nil {
			return 0, false, err
		}
		rev, changed, err = s.Commit(ctx, base, st, author, via, summary)
		var stale *StaleError
		if errors.As(err, &stale) && attempt < 50 {
			continue
		}
		return rev, changed, err
	}
}

// History lists the latest revisions, newest first, without their states.
func (s *Store) History(ctx context.Context, limit int) ([]Revision, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, created_at, author, via, summary FROM revisions ORDER BY id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("list revisions: %w", busy(err))
	}
	defer rows.Close()
	var out []Revision
	for rows.Next() {
		var r Revision
		var at string
		if err := rows.Scan(&r.ID, &at, &r.Author, &r.Via, &r.Summary); err != nil {
			return nil, fmt.Errorf("list revisions: %w", err)
		}
		r.At, _ = time.Parse(time.RFC3339Nano, at)
		out = append(out, r)
	}
	return out, rows.Err()
}

// Revision returns one revision with its state.
func (s *Store) Revision(ctx context.Context, id int64) (*Revision, error) {
	r := &Revision{ID: id}
	var at, doc string
	var kind int
	err := s.db.QueryRowContext(ctx, `SELECT created_at, author, via, summary, state, delta FROM revisions WHERE id = ?`, id).
		Scan(&at, &r.Author, &r.Via, &r.Summary, &doc, &kind)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("revision %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read revision %d: %w", id, busy(err))
	}
	r.At, _ = time.Parse(time.RFC3339Nano, at)
	switch kind {
	case kindReverse:
		if doc, err = s.undoDeltas(ctx, id, doc); err != nil {
			return nil, fmt.Errorf("read revision %d: %w", id, err)
		}
	case kindForward:
		b, err := forwardChain(ctx, s.db, id)
		if err != nil {
			return nil, fmt.Errorf("read revision %d: %w", id, err)
		}
		doc = string(b)
	}
	if r.State, err = decodeState(doc); err != nil {
		return nil, err
	}
	return r, nil
}

// undoDeltas rebuilds revision id's document from its reverse delta and the
// revisions after it, up to the first one kept whole.
func (s *Store) undoDeltas(ctx context.Context, id int64, delta string) (string, error) {
	deltas := []string{delta}
	rows, err := s.db.QueryContext(ctx, `SELECT state, delta FROM revisions WHERE id > ? ORDER BY id`, id)
	if err != nil {
		return "", busy(err)
	}
	defer rows.Close()
	var doc string
	for whole := false; !whole; {
		if !rows.Next() {
			if err := rows.Err(); err != nil {
				return "", busy(err)
			}
			return "", errors.New("no whole document after a reverse delta")
		}
		var state string
		var kind int
		if err := rows.Scan(&state, &kind); err != nil {
			return "", err
		}
		if kind == kindForward {
			return "", errors.New("a reverse delta is followed by a forward one")
		}
		if whole = kind == kindWhole; whole {
			doc = state
		} else {
			deltas = append(deltas, state)
		}
	}
	b := []byte(doc)
	for i := len(deltas) - 1; i >= 0; i-- {
		if b, err = UndoDelta([]byte(deltas[i]), b); err != nil {
			return "", err
		}
	}
	return string(b), nil
}

// LoadLedger reads what ipvsctl owns in the kernel.
func (s *Store) LoadLedger(ctx context.Context) (*ipvsmgr.Ledger, error) {
	var data string
	err := s.db.QueryRowContext(ctx, `SELECT data FROM ledger WHERE id = 1`).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return &ipvsmgr.Ledger{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read ledger: %w", busy(err))
	}
	var l ipvsmgr.Ledger
	if err := json.Unmarshal([]byte(data), &l); err != nil {
		return nil, fmt.Errorf("parse ledger: %w", err)
	}
	return &l, nil
}

// SaveLedger stores what ipvsctl owns in the kernel.
func (s *Store) SaveLedger(ctx context.Context, l *ipvsmgr.Ledger) error {
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("encode ledger: %w", err)
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO ledger (id, data) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET data = excluded.data`, string(b))
	if err != nil {
		return fmt.Errorf("save ledger: %w", busy(err))
	}
	return nil
}

// restrict makes a database file its owner's only (0600).
func restrict(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Perm() != 0o600 {
		if err := os.Chmod(path, 0o600); err != nil {
			return fmt.Errorf("restrict %s to its owner: %w", path, err)
		}
	}
	return nil
}

// Path is the database file.
func (s *Store) Path() string { return s.path }
