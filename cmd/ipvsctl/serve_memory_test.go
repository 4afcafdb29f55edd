package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/ipvsmgrtest"
)

// What the daemon holds with 1,000 tcp-checked real servers (issue 28):
// `ipvsctl serve --listen ""` runs in this process over the fake kernel and
// a real SQLite file (the panel, the metrics, the API's socket: serve's own
// parts) and checks 1,000 loopback addresses (127.1.0.1-127.1.3.250), all
// answered by one listener, every second. After 30 s (the VM benchmark's
// run) it reports this process's resident memory split into anonymous
// (heap, stacks, SQLite's cache) and file pages (the test binary's), then,
// after a GC, the live heap, the runtime's other memory and the
// goroutines, and with IPVSCTL_HEAP_PROFILE=FILE writes
// the heap profile (FILE: inuse_space after a GC; FILE.allocs: everything
// allocated since the start). Run once (GODEBUG=memprofilerate=1 profiles
// every allocation rather than one per 512 kB, and then holds more itself):
//
//	IPVSCTL_HEAP_PROFILE=/tmp/heap.pprof GODEBUG=memprofilerate=1 go test -run '^$' -bench HealthMemory1000 -benchtime 1x ./cmd/ipvsctl
//	go tool pprof -sample_index=inuse_space -top /tmp/heap.pprof
//
// The checks send SYNs from a raw socket (root); without, they connect.
func BenchmarkHealthMemory1000(b *testing.B) {
	const n, rounds = 1000, 30
	ln, err := net.Listen("tcp", ":0") // the loopback range is all this machine's: 127.1.x.y reach it
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	ipvsmgrtest.AcceptAndClose(ln)
	port := ln.Addr().(*net.TCPAddr).Port
	db := filepath.Join(b.TempDir(), "ipvsctl.db")
	var doc strings.Builder
	fmt.Fprintf(&doc, `{"services":[{"name":"bench","address":"198.18.0.100","port":%d,"forwarding":"dr","scheduler":"wlc",`+
		`"check":{"type":"tcp","interval":1,"timeout":1,"rise":2,"fall":3},"servers":[`, port)
	for i := range n {
		if i > 0 {
			doc.WriteString(",")
		}
		fmt.Fprintf(&doc, `{"address":"127.1.%d.%d"}`, i/250, 1+i%250)
	}
	doc.WriteString("]}]}")
	state := filepath.Join(b.TempDir(), "state.json")
	if err := os.WriteFile(state, []byte(doc.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	k := fakekernel.New()
	cli := func(stdout io.Writer, args ...string) int {
		env := &cliEnv{stdout: stdout, stderr: stdout, getenv: func(string) string { return "" }, kernel: k}
		if args[0] != "serve" { // another verb sets the CLI's GOGC: put serve's back
			gogc := debug.SetGCPercent(100)
			debug.SetGCPercent(gogc)
			defer debug.SetGCPercent(gogc)
		}
		return dispatch(env, append([]string{"--db", db}, args...))
	}
	if code := cli(io.Discard, "apply", "--no-apply", "-f", state); code != 0 {
		b.Fatalf("apply: exit %d", code)
	}
	served := make(chan int, 1)
	go func() { served <- cli(io.Discard, "serve", "--listen", "") }()
	defer func() {
		syscall.Kill(os.Getpid(), syscall.SIGTERM) // serve's own way to stop
		if code := <-served; code != 0 {
			b.Errorf("serve: exit %d", code)
		}
	}()
	for b.Loop() {
		time.Sleep(rounds * time.Second)
	}
	rss := procStatus(b, "RssAnon", "RssFile") // as the VM benchmark reads it: no GC forced
	var status strings.Builder
	if cli(&status, "status"); !strings.Contains(status.String(), "Checks: ready") {
		b.Fatalf("status: not every check has run:\n%s", status.String())
	}
	runtime.GC()
	samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"},
		{Name: "/gc/heap/goal:bytes"}, {Name: "/memory/classes/metadata/other:bytes"},
		{Name: "/sched/goroutines:goroutines"}, {Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/cpu/classes/total:cpu-seconds"}}
	metrics.Read(samples)
	mb := func(i int) float64 { return float64(samples[i].Value.Uint64()) / (1 << 20) }
	b.ReportMetric(mb(0), "heap-live-MB")
	b.ReportMetric(mb(1), "stacks-MB")
	b.ReportMetric(mb(2), "heap-goal-MB") // how far GOGC lets the heap grow before the next GC
	b.ReportMetric(mb(3), "gc-metadata-MB")
	b.ReportMetric(float64(samples[4].Value.Uint64()), "goroutines")
	b.ReportMetric(100*samples[5].Value.Float64()/samples[6].Value.Float64(), "gc-cpu-%")
	b.ReportMetric(rss["RssAnon"]/1024, "RssAnon-MB")
	b.ReportMetric(rss["RssFile"]/1024, "RssFile-MB")
	if p := os.Getenv("IPVSCTL_HEAP_PROFILE"); p != "" {
		writeProfile(b, "heap", p)
		writeProfile(b, "allocs", p+".allocs")
	}
}

// procStatus reads this process's /proc/self/status fields, in kB.
func procStatus(b *testing.B, names ...string) map[string]float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		for _, n := range names {
			if k == n {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				out[n] = kb
			}
		}
	}
	return out
}

func writeProfile(b *testing.B, name, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}
