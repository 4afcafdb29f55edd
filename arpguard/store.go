package arpguard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// ResultStore keeps the last result per real server, for the status output
// and the panel.
type ResultStore interface {
	// SaveResults replaces the stored result of each real server in rs.
	SaveResults(ctx context.Context, rs []Result) error
	// Results returns every stored result, ordered by target.
	Results(ctx context.Context) ([]Result, error)
}

// JSONFileStore is a ResultStore in one JSON file, replaced atomically.
type JSONFileStore struct {
	Path string
	mu   sync.Mutex
}

func (s *JSONFileStore) Results(ctx context.Context) ([]Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.load()
}

func (s *JSONFileStore) load() ([]Result, error) {
	b, err := os.ReadFile(s.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read real-server results: %w", err)
	}
	var rs []Result
	if err := json.Unmarshal(b, &rs); err != nil {
		return nil, fmt.Errorf("parse real-server results %s: %w", s.Path, err)
	}
	return rs, nil
}

func (s *JSONFileStore) SaveResults(ctx context.Context, rs []Result) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("save real-server results: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.load()
	if err != nil {
		return err
	}
	for _, r := range rs {
		i := slices.IndexFunc(cur, func(c Result) bool { return c.Target == r.Target })
		if i < 0 {
			cur = append(cur, r)
		} else {
			cur[i] = r
		}
	}
	slices.SortFunc(cur, func(a, b Result) int {
		switch {
		case a.Target < b.Target:
			return -1
		case a.Target > b.Target:
			return 1
		}
		return 0
	})
	b, err := json.MarshalIndent(cur, "", "  ")
	if err != nil {
		return fmt.Errorf("encode real-server results: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(s.Path), 0o755); err != nil {
		return fmt.Errorf("save real-server results: %w", err)
	}
	if err := writeFileAtomic(s.Path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("save real-server results to %s: %w", s.Path, err)
	}
	return nil
}
