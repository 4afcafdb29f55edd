package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

func manyServices(n int) *ipvsmgr.State {
	st := &ipvsmgr.State{}
	for i := range n {
		st.Services = append(st.Services, ipvsmgr.Service{Name: fmt.Sprintf("web%d", i), Protocol: "tcp",
			Address: fmt.Sprintf("198.18.0.%d", 100+i), Port: 80, Servers: []ipvsmgr.Server{{Name: "r1", Address: "198.18.0.11"}}})
	}
	return st
}

// A database whose header or whose pages are damaged: Open, or Check and
// Current, refuse with ErrCorrupt, naming the file and saying what to do.
func TestDamagedDatabaseIsRefusedWithWhatToDo(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		offset int64 // where the garbage goes
	}{{"header", 0}, {"a page of the revisions", 2 * 4096}} {
		t.Run(tc.name, func(t *testing.T) {
			s, path := openTemp(t)
			if _, _, err := s.Commit(ctx, 0, manyServices(3), "t", "cli", "three services"); err != nil {
				t.Fatal(err)
			}
			if err := s.Check(ctx); err != nil {
				t.Fatalf("check of a sound database: %v", err)
			}
			s.Close()
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte(strings.Repeat("\xffgarbage", 512)), tc.offset); err != nil {
				t.Fatal(err)
			}
			f.Close()
			s2, err := Open(ctx, path)
			if err == nil {
				defer s2.Close()
				err = s2.Check(ctx)
				if _, _, cerr := s2.Current(ctx); !errors.Is(cerr, ErrCorrupt) {
					t.Errorf("Current of the damaged database: %v, want ErrCorrupt", cerr)
				}
			}
			var ce *CorruptError
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.Path != path {
				t.Fatalf("damaged database: %v, want a CorruptError for %s", err, path)
			}
			for _, want := range []string{path, "the state database is damaged", "nothing was changed in the kernel",
				"ipvsadm -Sn | ipvsctl import --format ipvsadm --no-apply -"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message %q lacks %q", err, want)
				}
			}
		})
	}
}

// SQLite out of space (its page limit, as a full filesystem gives): the
// write is refused with ErrDiskFull, nothing of it is stored, and writes
// work again once there is room.
func TestDiskFullRefusesTheWriteAndLosesNothing(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	if _, _, err := s.Commit(ctx, 0, manyServices(1), "t", "cli", "one service"); err != nil {
		t.Fatal(err)
	}
	s.db.SetMaxOpenConns(1) // the page limit is the connection's
	var pages int
	if err := s.db.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, pages)); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.Commit(ctx, 1, manyServices(400), "t", "cli", "400 services")
	if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "filesystem is full: nothing was stored; free space there and try again") {
		t.Fatalf("write on a full disk: %v, want ErrDiskFull", err)
	}
	st, rev, err := s.Current(ctx)
	if err != nil || rev != 1 || len(st.Services) != 1 {
		t.Fatalf("after the refused write: revision %d with %d services (%v), want revision 1 with 1", rev, len(st.Services), err)
	}
	if _, err := s.db.ExecContext(ctx, `PRAGMA max_page_count = 1073741823`); err != nil {
		t.Fatal(err)
	}
	if rev, _, err := s.Commit(ctx, 1, manyServices(400), "t", "cli", "400 services"); err != nil || rev != 2 {
		t.Fatalf("write once there is room: revision %d, %v", rev, err)
	}
}
