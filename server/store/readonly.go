package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/mattn/go-sqlite3"

	"github.com/ipvsctl/ipvsctl/migrations"
)

// ErrSchemaBehind refuses a read-only open of a database that an older
// ipvsctl wrote: bringing its schema up to date is a write.
var ErrSchemaBehind = errors.New("database schema is older than this ipvsctl")

// OpenReadOnly opens the state database at path for reading only: it
// creates nothing, changes no mode, applies no migration and writes no page,
// so the read verbs (history, export, status, why, diff) work on a full
// filesystem and on a read-only one, where Open cannot. A database whose
// schema is behind is refused (any write, or the daemon, upgrades it).
func OpenReadOnly(ctx context.Context, path string) (*Store, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	s, err := openRO(ctx, path, "")
	var se sqlite3.Error
	if errors.As(err, &se) && se.Code == sqlite3.ErrCantOpen || errors.Is(busy(err), ErrDiskFull) {
		// A WAL database whose -shm is not there (nothing had it open) on a
		// read-only or full filesystem: SQLite cannot make its index. The
		// main file alone is the whole database when no -wal holds pages
		// beyond it.
		if wal, serr := os.Stat(path + "-wal"); serr == nil && wal.Size() > 0 {
			return nil, fmt.Errorf("open database %s read-only: its write-ahead log holds changes not yet in the main file, "+
				"and the filesystem is read-only: open it once where it can be written", path)
		} else if serr != nil && !errors.Is(serr, fs.ErrNotExist) {
			return nil, fmt.Errorf("open database %s: %w", path, serr)
		}
		s, err = openRO(ctx, path, "&immutable=1")
	}
	if err != nil {
		return nil, corruptAdvice(path, busy(err))
	}
	if _, err := os.Stat(legacyResultsPath(path)); err == nil {
		s.Close()
		return nil, fmt.Errorf("%w: %s has a real-server results file beside it that an older ipvsctl kept, not yet moved in; "+
			"run any write (or start the daemon) to move it", ErrSchemaBehind, path)
	}
	return s, nil
}

func openRO(ctx context.Context, path, extra string) (*Store, error) {
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro&_busy_timeout=10000&_foreign_keys=on&_stmt_cache_size=64"+extra)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, path: path}
	latest := migrations.Latest()
	v, err := s.SchemaVersion(ctx)
	switch {
	case err != nil:
		db.Close()
		return nil, err
	case v > latest:
		db.Close()
		return nil, fmt.Errorf("%w: %s is at schema version %d, this ipvsctl knows up to %d; upgrade ipvsctl", ErrSchemaNewer, path, v, latest)
	case v < latest:
		db.Close()
		return nil, fmt.Errorf("%w: %s is at schema version %d, this ipvsctl's is %d; run any write (or start the daemon) to upgrade it",
			ErrSchemaBehind, path, v, latest)
	}
	return s, nil
}
