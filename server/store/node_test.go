package store

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

func TestNodeSettingsAcrossReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ipvsctl.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.Node(ctx)
	if err != nil || n.Priority != 100 || n.Role != "auto" || !n.UpdatedAt.IsZero() {
		t.Fatalf("defaults: %+v, %v", n, err)
	}
	want := Node{Priority: 150, Role: "backup", PeerURL: "https://198.18.0.2:3636", PeerToken: "secret", Address: "198.18.0.3",
		PeerFingerprint: "sha256:" + strings.Repeat("ab", 32), AllowReplicatedExec: true,
		Replication: "source", PeerCA: "-----BEGIN CERTIFICATE-----\n", FollowerFingerprints: []string{"sha256:" + strings.Repeat("cd", 32), "sha256:" + strings.Repeat("ef", 32)}}
	if err := s.SaveNode(ctx, want); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveNode(ctx, Node{Priority: 0, Role: "auto"}); err == nil {
		t.Error("priority 0 stored")
	}
	s.Close()
	if s, err = Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Node(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got.UpdatedAt = want.UpdatedAt
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back %+v, want %+v", got, want)
	}
}

func TestHeadHashesTheStoredDocument(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ipvsctl.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if h, err := s.Head(ctx); err != nil || h.Revision != 0 {
		t.Fatalf("empty head %+v, %v", h, err)
	}
	st := &ipvsmgr.State{Services: []ipvsmgr.Service{{Name: "web", Address: "198.18.0.100", Port: 80, Servers: []ipvsmgr.Server{}}}}
	if _, _, err := s.Commit(ctx, 0, st, "alice", "cli", "add web"); err != nil {
		t.Fatal(err)
	}
	h, err := s.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := Encode(st)
	if h.Revision != 1 || h.Author != "alice" || h.Hash != DocumentHash(doc) || h.At.IsZero() {
		t.Errorf("head %+v", h)
	}
}
