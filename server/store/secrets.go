package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// SecretsDir is where the migration of BGP passwords writes their files:
// the directory "secrets" beside the database at dbPath.
func SecretsDir(dbPath string) string { return filepath.Join(filepath.Dir(dbPath), "secrets") }

// MigrationNotes are what the migrations of this Open did that an operator
// must hear of (serve logs them); nil when there were none.
func (s *Store) MigrationNotes() []string { return s.notes }

// passwordFiles gives each distinct (peer, key) its file: the current
// state's key the plain name, older keys of the same peer a number.
type passwordFiles struct {
	dir   string
	files map[string]map[string]string // peer name -> key -> file
	keys  map[string]bool              // every distinct key met
	wrote int
}

func peerFileName(p *ipvsmgr.BGPPeer) string {
	name := strings.NewReplacer(":", "_", "/", "_", "%", "_").Replace(p.Address)
	if p.Port != 0 {
		name += "-" + strconv.Itoa(p.Port)
	}
	return "bgp-peer-" + name
}

// file is the file that holds key for peer p, written when first asked.
func (pf *passwordFiles) file(field string, p *ipvsmgr.BGPPeer, key string) (string, error) {
	name := peerFileName(p)
	byKey := pf.files[name]
	if byKey == nil {
		byKey = map[string]string{}
		pf.files[name] = byKey
	}
	if f, ok := byKey[key]; ok {
		return f, nil
	}
	if strings.HasSuffix(key, "\n") || strings.HasSuffix(key, "\r") {
		return "", fmt.Errorf("%s.password: a key that ends in a line end cannot go in a file (its line end is not part of it): set password_file by hand", field)
	}
	if err := os.MkdirAll(pf.dir, 0o700); err != nil {
		return "", fmt.Errorf("%s.password: create %s: %w", field, pf.dir, err)
	}
	for n := 1; ; n++ {
		path := filepath.Join(pf.dir, name+".key")
		if n > 1 {
			path = filepath.Join(pf.dir, name+"."+strconv.Itoa(n)+".key")
		}
		if taken(byKey, path) {
			continue
		}
		old, err := os.ReadFile(path)
		if err == nil && string(bytes.TrimSuffix(old, []byte("\n"))) != key {
			continue // another key's file (of a run that did not commit, or the operator's)
		}
		if err != nil && !os.IsNotExist(err) {
			return "", fmt.Errorf("%s.password: read %s: %w", field, path, err)
		}
		if err != nil {
			if err := writeSecret(path, key+"\n"); err != nil {
				return "", fmt.Errorf("%s.password: write %s: %w", field, path, err)
			}
			pf.wrote++
		}
		byKey[key], pf.keys[key] = path, true
		return path, nil
	}
}

func taken(byKey map[string]string, path string) bool {
	for _, f := range byKey {
		if f == path {
			return true
		}
	}
	return false
}

// writeSecret writes a file of mode 0600 in one step (a temporary file
// renamed), synced.
func writeSecret(path, content string) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// moveKeys replaces each peer's password by its password_file; it reports
// whether it changed anything.
func (pf *passwordFiles) moveKeys(s *ipvsmgr.Settings) (bool, error) {
	if s.BGP == nil {
		return false, nil
	}
	changed := false
	for i := range s.BGP.Peers {
		p := &s.BGP.Peers[i]
		if p.LegacyPassword == "" {
			continue
		}
		f, err := pf.file(fmt.Sprintf("settings.bgp.peers[%d]", i), p, string(p.LegacyPassword))
		if err != nil {
			return false, err
		}
		p.PasswordFile, p.LegacyPassword, changed = f, "", true
	}
	return changed, nil
}

// convertBGPPasswords is migration 0017's step (0017_bgp_password_files.sql
// says what it does).
func (s *Store) convertBGPPasswords(ctx context.Context, tx *sql.Tx) error {
	pf := &passwordFiles{dir: s.secretsDir, files: map[string]map[string]string{}, keys: map[string]bool{}}
	revs, err := s.scrubRevisions(ctx, tx, pf)
	if err != nil {
		return err
	}
	drafts, err := s.scrubDrafts(ctx, tx, pf)
	if err != nil {
		return err
	}
	if revs == 0 && drafts == 0 {
		return nil
	}
	// The keys may also be quoted in what was said of the changes.
	keys := make([]string, 0, len(pf.keys))
	for k := range pf.keys {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
	for _, k := range keys {
		forms := []string{k}
		if q, _ := json.Marshal(k); string(q[1:len(q)-1]) != k {
			forms = append(forms, string(q[1:len(q)-1]))
		}
		for _, f := range forms {
			for _, q := range []string{
				`UPDATE revisions SET summary = replace(summary, ?1, ?2) WHERE instr(summary, ?1) > 0`,
				`UPDATE audit SET detail = replace(detail, ?1, ?2), target = replace(target, ?1, ?2) WHERE instr(detail, ?1) > 0 OR instr(target, ?1) > 0`,
			} {
				if _, err := tx.ExecContext(ctx, q, f, ipvsmgr.SecretNotKept); err != nil {
					return fmt.Errorf("scrub the summaries: %w", err)
				}
			}
		}
	}
	msg := fmt.Sprintf("moved %d BGP passwords to files; scrubbed from %d revisions and %d drafts", len(pf.keys), revs, drafts)
	if len(pf.keys) > 0 {
		msg += " (the files are in " + pf.dir + ")"
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO audit (at, actor, via, client_addr, action, target, revision, outcome, detail)
		VALUES (?, 'ipvsctl', 'cli', '', 'migrate', '0017_bgp_password_files', NULL, ?, ?)`,
		dbTime(time.Now()), OutcomeSuccess, msg); err != nil {
		return fmt.Errorf("write the audit record: %w", err)
	}
	s.notes = append(s.notes, "migration 0017: "+msg)
	s.vacuum = true
	return nil
}

// scrubRevisions rewrites each revision whose settings hold a BGP password
// or whose imported keys hold a secret, newest first; it returns how many
// it rewrote. Only settings and imported change: the services, and so the
// deltas' references to them, stay as they are.
func (s *Store) scrubRevisions(ctx context.Context, tx *sql.Tx, pf *passwordFiles) (int, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, state, delta FROM revisions ORDER BY id DESC`)
	if err != nil {
		return 0, err
	}
	type rewrite struct {
		id  int64
		doc []byte
	}
	var todo []rewrite
	for rows.Next() {
		var id int64
		var doc []byte
		var kind int
		if err := rows.Scan(&id, &doc, &kind); err != nil {
			rows.Close()
			return 0, err
		}
		out, err := pf.scrubStored(doc, kind == kindWhole)
		if err != nil {
			rows.Close()
			return 0, fmt.Errorf("revision %d: %w", id, err)
		}
		if out != nil {
			todo = append(todo, rewrite{id, out})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	for _, r := range todo {
		if _, err := tx.ExecContext(ctx, `UPDATE revisions SET state = ? WHERE id = ?`, string(r.doc), r.id); err != nil {
			return 0, fmt.Errorf("rewrite revision %d: %w", r.id, err)
		}
	}
	return len(todo), nil
}

// scrubStored is a stored document (or delta) without its secrets, nil when
// it has none. A whole document not in the stored form is decoded whole.
func (pf *passwordFiles) scrubStored(doc []byte, whole bool) ([]byte, error) {
	p, ok := ipvsmgr.SplitStored(doc)
	if !ok {
		if !whole {
			return nil, errNotStored
		}
		return pf.scrubWhole(doc)
	}
	var settings ipvsmgr.Settings
	var imported []ipvsmgr.ImportedKey
	if err := strictJSON(p.Settings, &settings); err != nil {
		return nil, fmt.Errorf("settings: %w", err)
	}
	if p.Imported != nil {
		if err := strictJSON(p.Imported, &imported); err != nil {
			return nil, fmt.Errorf("imported: %w", err)
		}
	}
	moved, err := pf.moveKeys(&settings)
	if err != nil {
		return nil, err
	}
	scrubbed := ipvsmgr.ScrubImported(imported)
	if !moved && scrubbed == 0 {
		return nil, nil
	}
	if p.Settings, err = json.Marshal(settings); err != nil {
		return nil, err
	}
	if p.Imported != nil {
		if p.Imported, err = json.Marshal(imported); err != nil {
			return nil, err
		}
	}
	return p.Join(), nil
}

// scrubWhole is scrubStored for a whole document in any JSON form; it is
// written back in the stored form.
func (pf *passwordFiles) scrubWhole(doc []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	var st ipvsmgr.State
	if err := dec.Decode(&st); err != nil {
		return nil, err
	}
	moved, err := pf.moveKeys(&st.Settings)
	if err != nil {
		return nil, err
	}
	if !moved && ipvsmgr.ScrubImported(st.Imported) == 0 {
		return nil, nil
	}
	return Encode(&st)
}

func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// scrubDrafts is scrubRevisions for the panel's drafts (whole documents).
func (s *Store) scrubDrafts(ctx context.Context, tx *sql.Tx, pf *passwordFiles) (int, error) {
	rows, err := tx.QueryContext(ctx, `SELECT author, doc FROM panel_drafts ORDER BY author`)
	if err != nil {
		return 0, err
	}
	docs := map[string][]byte{}
	for rows.Next() {
		var author string
		var doc []byte
		if err := rows.Scan(&author, &doc); err != nil {
			rows.Close()
			return 0, err
		}
		docs[author] = doc
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	n := 0
	for author, doc := range docs {
		out, err := pf.scrubWhole(doc)
		if err != nil {
			return 0, fmt.Errorf("draft of %s: %w", author, err)
		}
		if out == nil {
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE panel_drafts SET doc = ? WHERE author = ?`, string(out), author); err != nil {
			return 0, fmt.Errorf("rewrite the draft of %s: %w", author, err)
		}
		n++
	}
	return n, nil
}
