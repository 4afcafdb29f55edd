package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Node is this director's own settings, outside the replicated revisions.
type Node struct {
	Priority  int       // VRRP priority 1..255
	Role      string    // auto, master or backup
	PeerURL   string    // the other director's API ("" for none)
	PeerToken string    // presented to the peer; never shown
	Address   string    // this director's address among the peers ("" = from its interfaces)
	UpdatedAt time.Time // zero while never set
	// PeerFingerprint is the SHA-256 fingerprint the peer's certificate must have.
	PeerFingerprint string
	// AllowReplicatedExec lets replication bring exec checks onto this director.
	AllowReplicatedExec bool
	// BGP mode (settings.bgp): the router ID, the sessions' source address
	// ("" for the defaults) and whether the operator drained the director.
	RouterID   string
	BGPSource  string
	BGPDrained bool
	// Replication is pair, source or follower (0015_node_directors.sql);
	// PeerCA a pair CA (PEM); FollowerFingerprints the followers' pins.
	Replication          string
	PeerCA               string
	FollowerFingerprints []string
	// IdentityCert is the certificate file serve last started with
	// (0016_node_identity.sql); SaveIdentityCert writes it, SaveNode keeps it.
	IdentityCert string
}

// DefaultNode is a director's settings before any node set.
func DefaultNode() Node { return Node{Priority: 100, Role: "auto", Replication: "pair"} }

// Node returns this director's settings (the defaults while never set).
func (s *Store) Node(ctx context.Context) (Node, error) {
	n := DefaultNode()
	var at, followers string
	err := s.db.QueryRowContext(ctx, `SELECT priority, role, peer_url, peer_token, address, updated_at, peer_fingerprint, allow_replicated_exec,
		router_id, bgp_source, bgp_drained, replication, peer_ca, follower_fingerprints, identity_cert FROM node WHERE id = 1`).
		Scan(&n.Priority, &n.Role, &n.PeerURL, &n.PeerToken, &n.Address, &at, &n.PeerFingerprint, &n.AllowReplicatedExec,
			&n.RouterID, &n.BGPSource, &n.BGPDrained, &n.Replication, &n.PeerCA, &followers, &n.IdentityCert)
	if errors.Is(err, sql.ErrNoRows) {
		return n, nil
	}
	if err != nil {
		return n, fmt.Errorf("read node settings: %w", busy(err))
	}
	n.UpdatedAt = parseTime(at)
	n.FollowerFingerprints = strings.Fields(followers)
	return n, nil
}

// SaveNode replaces this director's settings.
func (s *Store) SaveNode(ctx context.Context, n Node) error {
	if n.UpdatedAt.IsZero() {
		n.UpdatedAt = time.Now()
	}
	if n.Replication == "" {
		n.Replication = "pair"
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO node (id, priority, role, peer_url, peer_token, address, updated_at,
			peer_fingerprint, allow_replicated_exec, router_id, bgp_source, bgp_drained, replication, peer_ca, follower_fingerprints)
		VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET priority = excluded.priority, role = excluded.role, peer_url = excluded.peer_url,
			peer_token = excluded.peer_token, address = excluded.address, updated_at = excluded.updated_at,
			peer_fingerprint = excluded.peer_fingerprint, allow_replicated_exec = excluded.allow_replicated_exec,
			router_id = excluded.router_id, bgp_source = excluded.bgp_source, bgp_drained = excluded.bgp_drained,
			replication = excluded.replication, peer_ca = excluded.peer_ca, follower_fingerprints = excluded.follower_fingerprints`,
		n.Priority, n.Role, n.PeerURL, n.PeerToken, n.Address, dbTime(n.UpdatedAt), n.PeerFingerprint, n.AllowReplicatedExec,
		n.RouterID, n.BGPSource, n.BGPDrained, n.Replication, n.PeerCA, strings.Join(n.FollowerFingerprints, " "))
	if err != nil {
		return fmt.Errorf("save node settings: %w", busy(err))
	}
	return nil
}

// SaveIdentityCert records the certificate file serve started with (its
// absolute path), leaving the other node settings as they are.
func (s *Store) SaveIdentityCert(ctx context.Context, path string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO node (id, identity_cert) VALUES (1, ?)
		ON CONFLICT (id) DO UPDATE SET identity_cert = excluded.identity_cert`, path)
	if err != nil {
		return fmt.Errorf("record serve's certificate %s: %w", path, busy(err))
	}
	return nil
}

// Head is the current revision as replication compares it: who made it,
// when, and a hash of its document.
type Head struct {
	Revision int64
	At       time.Time
	Author   string
	Hash     string // hex SHA-256 of the stored document
	Document []byte
}

// DocumentHash is the hash Head gives a stored document.
func DocumentHash(doc []byte) string {
	h := sha256.Sum256(doc)
	return hex.EncodeToString(h[:])
}

// Head returns the current revision with its document (Revision 0 before
// the first change).
func (s *Store) Head(ctx context.Context) (*Head, error) {
	h := &Head{}
	var at, doc string
	err := s.db.QueryRowContext(ctx, `SELECT id, created_at, author, state FROM revisions ORDER BY id DESC LIMIT 1`).
		Scan(&h.Revision, &at, &h.Author, &doc)
	if errors.Is(err, sql.ErrNoRows) {
		return h, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read current revision: %w", busy(err))
	}
	h.At, h.Document, h.Hash = parseTime(at), []byte(doc), DocumentHash([]byte(doc))
	return h, nil
}

// SyncedHash is the hash of the document this director and its peer last
// agreed on ("" before they ever did), and when.
func (s *Store) SyncedHash(ctx context.Context) (string, time.Time, error) {
	var h, at string
	err := s.db.QueryRowContext(ctx, `SELECT synced_hash, synced_at FROM replication WHERE id = 1`).Scan(&h, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return "", time.Time{}, nil
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("read replication state: %w", busy(err))
	}
	return h, parseTime(at), nil
}

// SaveSyncedHash records that both directors have the document of hash.
func (s *Store) SaveSyncedHash(ctx context.Context, hash string, at time.Time) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO replication (id, synced_hash, synced_at) VALUES (1, ?, ?)
		ON CONFLICT (id) DO UPDATE SET synced_hash = excluded.synced_hash, synced_at = excluded.synced_at`, hash, dbTime(at))
	if err != nil {
		return fmt.Errorf("save replication state: %w", busy(err))
	}
	return nil
}

// FirstRevisionAfter is when the first revision after rev was made (ok is
// false while there is none): how long a director that has rev is behind.
func (s *Store) FirstRevisionAfter(ctx context.Context, rev int64) (at time.Time, ok bool, err error) {
	var v string
	err = s.db.QueryRowContext(ctx, `SELECT created_at FROM revisions WHERE id > ? ORDER BY id LIMIT 1`, rev).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read the revision after %d: %w", rev, busy(err))
	}
	return parseTime(v), true, nil
}
