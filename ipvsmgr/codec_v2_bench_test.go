//go:build goexperiment.jsonv2

package ipvsmgr_test

import (
	jsonv1 "encoding/json"
	"encoding/json/v2"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// The decoder (codec.go) against encoding/json/v2 on a director's document:
// 1,000 services x 10 real servers (11,000 entries). Run with
// GOEXPERIMENT=jsonv2 go test -run '^$' -bench CodecVersusJSONv2 ./ipvsmgr
// (without the experiment this file is not built); -benchtime 30x runs 30
// rounds. It prints the ratios measured in the same run.
func BenchmarkCodecVersusJSONv2(b *testing.B) {
	doc := []byte(codecDoc(1000, 10))
	cases := []struct {
		name string
		f    func() error
	}{
		{"decode/codec", func() error {
			if _, ok := ipvsmgr.DecodeFast(doc); !ok {
				return fmt.Errorf("fast decoder gave up")
			}
			return nil
		}},
		{"decode/jsonv2", func() error {
			var s ipvsmgr.State
			return json.Unmarshal(doc, &s, json.RejectUnknownMembers(true))
		}},
		{"decode/jsonv1", func() error {
			var s ipvsmgr.State
			return jsonv1.Unmarshal(doc, &s)
		}},
	}
	// The contenders take turns, round after round, so that a busy spell of
	// a shared machine falls on all of them alike; each figure is the median
	// of its rounds.
	rounds := max(b.N, 5)
	ns := map[string][]float64{}
	allocs := map[string]float64{}
	for _, c := range cases {
		allocs[c.name] = testing.AllocsPerRun(3, func() { c.f() })
	}
	b.ResetTimer()
	for range rounds {
		for _, c := range cases {
			start := time.Now()
			if err := c.f(); err != nil {
				b.Fatal(c.name, err)
			}
			ns[c.name] = append(ns[c.name], float64(time.Since(start).Nanoseconds()))
		}
	}
	b.StopTimer()
	med := func(name string) float64 {
		v := slices.Clone(ns[name])
		slices.Sort(v)
		return v[len(v)/2]
	}
	for _, op := range []string{"decode"} {
		c, v2, v1 := med(op+"/codec"), med(op+"/jsonv2"), med(op+"/jsonv1")
		b.ReportMetric(v2/c, op+"-v2/codec")
		b.Logf("%s, median of %d rounds: codec %v (%.0f allocs), json/v2 %v (%.0f allocs), json/v1 %v (%.0f allocs): json/v2 takes %.2fx the codec's time, json/v1 %.2fx",
			op, rounds, time.Duration(c), allocs[op+"/codec"], time.Duration(v2), allocs[op+"/jsonv2"], time.Duration(v1), allocs[op+"/jsonv1"], v2/c, v1/c)
	}
}

func codecDoc(n, m int) string {
	var sb strings.Builder
	sb.WriteString(`{"services":[`)
	for i := range n {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"name":"s%d","protocol":"tcp","address":"198.18.%d.%d","port":80,"interface":"eth0","scheduler":"wrr","forwarding":"dr","enabled":true,"servers":[`, i, i/250, 1+i%250)
		for j := range m {
			if j > 0 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, `{"name":"r%d","address":"198.19.%d.%d","port":80,"weight":%d,"enabled":true}`, j, j, 1+i%250, 1+j)
		}
		sb.WriteString("]}")
	}
	sb.WriteString("]}")
	return sb.String()
}
