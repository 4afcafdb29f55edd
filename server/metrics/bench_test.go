package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
)

// BenchmarkExposition11000 renders the whole exposition of 1,000 services
// of 11 real servers each (some 100,000 series), as every scrape after a
// change of what the daemon knows does.
func BenchmarkExposition11000(b *testing.B) {
	ctx := context.Background()
	core, _ := testCore(b, ctx)
	var s ipvsmgr.State
	for i := range 1000 {
		svc := ipvsmgr.Service{Name: fmt.Sprintf("s%d", i), Protocol: "tcp", Address: fmt.Sprintf("198.18.%d.%d", 100+i/250, i%250+1), Port: 80}
		for j := range 11 {
			svc.Servers = append(svc.Servers, ipvsmgr.Server{Address: fmt.Sprintf("198.19.%d.%d", j, i%250+1)})
		}
		s.Services = append(s.Services, svc)
	}
	doc, _ := json.Marshal(s)
	if _, err := core.Apply(ctx, server.Actor{Name: "b", Via: "test"}, bytes.NewReader(doc), "bench", server.WriteOptions{}); err != nil {
		b.Fatal(err)
	}
	m := New(core)
	b.ReportAllocs()
	b.ResetTimer()
	var n int
	for b.Loop() {
		n = len(m.exposition())
	}
	b.ReportMetric(float64(n), "bytes")
}
