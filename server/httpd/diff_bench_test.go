package httpd_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// slowTable is the fake kernel with the cost of reading a large table: a
// dump of 11,000 entries takes tens of milliseconds on a real director.
type slowTable struct {
	ipvsmgr.Kernel
	delay time.Duration
}

func (k slowTable) Table(ctx context.Context) (*ipvsmgr.Table, error) {
	time.Sleep(k.delay)
	return k.Kernel.Table(ctx)
}

func bigDoc(n, m int) string {
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
			fmt.Fprintf(&b, `{"name":"r%d","address":"198.19.%d.%d","weight":%d}`, j, j, 1+i%250, 1+j)
		}
		b.WriteString("]}")
	}
	b.WriteString("]}")
	return b.String()
}

// BenchmarkPatchBesideDiffViewers: the latency of one PATCH of a real
// server's weight on 1,000 services x 10 real servers, alone and while 20
// viewers poll GET /api/v1/diff, in the same run; the ratio is reported
// (not asserted). The fake kernel's table read takes 30 ms, as a large
// table's does: a diff that read the kernel under the reconcile's lock
// would put every PATCH behind the viewers' reads.
func BenchmarkPatchBesideDiffViewers(b *testing.B) {
	k, host := fakekernel.New(), fakekernel.NewHost()
	g := servertest.Start(b, func(c *server.Config) {
		c.OpenKernel = func() (*server.KernelConn, error) {
			return &server.KernelConn{Kernel: slowTable{Kernel: k, delay: 30 * time.Millisecond}, Host: host, Close: func() {}}, nil
		}
	})
	req := func(token, method, path, body string) (int, error) {
		r, err := http.NewRequest(method, g.URL+path, strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		r.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, err
	}
	if code, err := req(g.Tokens[auth.Admin], "PUT", "/api/v1/state", bigDoc(1000, 10)); err != nil || code != 200 {
		b.Fatal(code, err)
	}
	w := 0
	patch := func() time.Duration {
		w = 2 + (w+1)%50
		start := time.Now()
		code, err := req(g.Tokens[auth.Operator], "PATCH", "/api/v1/services/s500/servers/r3", fmt.Sprintf(`{"weight":%d}`, w))
		if err != nil || code != 200 {
			b.Fatal(code, err)
		}
		return time.Since(start)
	}
	median := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)/2]
	}
	var alone []time.Duration
	for range 30 {
		alone = append(alone, patch())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	var wg sync.WaitGroup
	var polls atomic.Int64
	for range 20 {
		wg.Go(func() {
			for ctx.Err() == nil {
				if code, err := req(g.Tokens[auth.Viewer], "GET", "/api/v1/diff", ""); err == nil && code == 200 {
					polls.Add(1)
				}
			}
		})
	}
	for polls.Load() < 20 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond) // every viewer under way
	}
	b.ResetTimer()
	var beside []time.Duration
	start := time.Now()
	n0 := polls.Load()
	for b.Loop() {
		beside = append(beside, patch())
	}
	elapsed := time.Since(start)
	n := polls.Load() - n0
	b.StopTimer()
	cancel()
	wg.Wait()
	a, v := median(alone), median(beside)
	b.ReportMetric(float64(v)/float64(a), "ratio")
	b.ReportMetric(float64(n)/elapsed.Seconds(), "diffs/s")
	b.Logf("PATCH median alone %v, beside 20 viewers polling /diff %v (ratio %.2fx); %d diffs answered in %v, kernel table reads %d",
		a, v, float64(v)/float64(a), n, elapsed.Round(time.Millisecond), server.DaemonSideOf(g.Core).KernelReads())
}
