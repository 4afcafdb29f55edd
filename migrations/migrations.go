// Package migrations holds the numbered SQL files that build the state
// database, applied in order at open, each in its own transaction.
package migrations

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

//go:embed *.sql
var files embed.FS

// Migration is one numbered schema step.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Latest is the schema version the migrations build: the number of files
// (All checks that they run 1, 2, 3... without gaps). It reads none of them,
// so that a database found up to date costs no copy of the SQL.
func Latest() int {
	names, _ := fs.Glob(files, "*.sql")
	return len(names)
}

// All returns the migrations in order. A file is named NNNN_name.sql.
func All() ([]Migration, error) {
	names, err := fs.Glob(files, "*.sql")
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, n := range names {
		num, name, ok := strings.Cut(strings.TrimSuffix(n, ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration file %q is not named NNNN_name.sql", n)
		}
		b, err := files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %04d_%s: versions must run 1, 2, 3... without gaps", m.Version, m.Name)
		}
	}
	return out, nil
}
