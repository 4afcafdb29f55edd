package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// testStore is a real SQLite store in t's temporary directory, closed when
// t ends.
func testStore(t testing.TB, ctx context.Context) *store.Store {
	t.Helper()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "ipvsctl.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// openFake is a core's OpenKernel that always opens k (and host, when not
// nil): the fake kernel the daemon's tests look at.
func openFake(k *fakekernel.Kernel, host *fakekernel.Host) func() (*server.KernelConn, error) {
	kc := server.KernelConn{Kernel: k, Close: func() {}}
	if host != nil { // not a typed nil in the interface
		kc.Host = host
	}
	return func() (*server.KernelConn, error) {
		c := kc
		return &c, nil
	}
}

// applyState applies st through the core's Apply, as the document a user
// would send, without waiting for the daemon's reconcile.
func applyState(ctx context.Context, c *server.Core, a server.Actor, st *ipvsmgr.State, label string) (*server.WriteResult, error) {
	doc, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	return c.Apply(ctx, a, bytes.NewReader(doc), label, server.WriteOptions{NoWait: true})
}
