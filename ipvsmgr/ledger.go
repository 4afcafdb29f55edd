package ipvsmgr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// FileLedger keeps the ledger in a JSON file, replaced atomically.
type FileLedger struct {
	Path string
}

// LoadLedger reads the ledger; a missing file is an empty ledger.
func (f FileLedger) LoadLedger(context.Context) (*Ledger, error) {
	data, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Ledger{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read ledger: %w", err)
	}
	var l Ledger
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("parse ledger %s: %w", f.Path, err)
	}
	return &l, nil
}

// SaveLedger writes the ledger to a temporary file and renames it over the old.
func (f FileLedger) SaveLedger(_ context.Context, l *Ledger) error {
	data, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("encode ledger: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
		return fmt.Errorf("create ledger directory: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.Path), ".ledger-*")
	if err != nil {
		return fmt.Errorf("write ledger: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write ledger: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write ledger: %w", err)
	}
	if err := os.Rename(tmp.Name(), f.Path); err != nil {
		return fmt.Errorf("replace ledger: %w", err)
	}
	return nil
}
