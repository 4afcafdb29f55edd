package daemon_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/daemon"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// bigState is a director of n services x m real servers.
func bigState(n, m int) string {
	var b strings.Builder
	b.WriteString(`{"services":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name":"s%d","address":"198.18.%d.%d","port":80,"scheduler":"wrr","servers":[`, i, i/250, 1+i%250)
		for j := range m {
			if j > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"address":"198.19.%d.%d","weight":%d}`, j, 1+i%250, 1+j)
		}
		b.WriteString("]}")
	}
	b.WriteString("]}")
	return b.String()
}

// One weight change through the daemon's core on 1,000 services x 10 real
// servers: what a PATCH of one real server costs besides HTTP.
func BenchmarkWeightChangeThroughDaemon(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := store.Open(ctx, filepath.Join(b.TempDir(), "ipvsctl.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	k := fakekernel.New()
	core := server.New(server.Config{Store: st, Log: slog.New(slog.DiscardHandler), OpenKernel: func() (*server.KernelConn, error) {
		return &server.KernelConn{Kernel: k, Close: func() {}}, nil
	}})
	d := daemon.New(core, st, slog.New(slog.DiscardHandler))
	d.Interval = time.Hour
	go d.Run(ctx)
	a := server.Actor{Name: "bench", Via: "api"}
	if _, err := core.Apply(ctx, a, strings.NewReader(bigState(1000, 10)), "bench", server.WriteOptions{}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		w := 2 + i%50
		res, err := core.PatchServer(ctx, a, "s500", "198.19.3.1", server.ServerPatch{Weight: &w}, server.WriteOptions{NoWait: true})
		if err != nil || len(res.Failures) > 0 {
			b.Fatal(err, res)
		}
	}
}
