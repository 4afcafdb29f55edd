package metrics

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// testCore is a core over a real SQLite store in tb's temporary directory
// (closed when tb ends) and a fake kernel.
func testCore(tb testing.TB, ctx context.Context) (*server.Core, *store.Store) {
	tb.Helper()
	st, err := store.Open(ctx, filepath.Join(tb.TempDir(), "ipvsctl.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	k := fakekernel.New()
	return server.New(server.Config{Store: st, OpenKernel: func() (*server.KernelConn, error) {
		return &server.KernelConn{Kernel: k, Close: func() {}}, nil
	}}), st
}
