// Command apiclient is the benchmark's API client (scripts/bench/guest.sh
// runs it inside the VM, in the daemon's network namespace). It stays
// connected (one kept-alive connection per client) and prints each figure
// beside its peer or floor, with no pass or fail:
//
//	apiclient -url URL -token T weight -service S -server R [-n 7]
//	    one weight change (PATCH .../servers/{sid}), answered once the kernel
//	    has it, beside `ipvsadm -Sn` of the same table, taken in turn.
//	apiclient -url URL -token T load [-clients 20] [-requests 2000] [-duration 30s]
//	    GET /api/v1/status and GET /metrics under concurrent clients, each
//	    beside a static file of the same size served by net/http's file
//	    server in this process, with the daemon's kernel reads meanwhile.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type client struct {
	hc    *http.Client
	base  string
	token string
}

func newClient(base, token string, conns int) *client {
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, DisableCompression: true}
	return &client{hc: &http.Client{Transport: tr, Timeout: 5 * time.Minute}, base: strings.TrimRight(base, "/"), token: token}
}

// do makes one request and reads the whole answer; it fails unless 200.
func (c *client) do(ctx context.Context, method, path, body string) ([]byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s %s: %s: %.300s", method, path, resp.Status, b)
	}
	return b, err
}

func main() {
	base := flag.String("url", "http://127.0.0.1:3636", "the daemon's API")
	token := flag.String("token", os.Getenv("IPVSCTL_TOKEN"), "API token")
	flag.Parse()
	if flag.NArg() < 1 {
		log.Fatal("usage: apiclient [-url URL] [-token T] weight|load [flags]")
	}
	mode, args := flag.Arg(0), flag.Args()[1:]
	switch mode {
	case "weight":
		weight(*base, *token, args)
	case "load":
		load(*base, *token, args)
	default:
		log.Fatalf("unknown mode %q", mode)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func median(v []time.Duration) time.Duration {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// quantile is the nearest-rank q-quantile.
func quantile(s []time.Duration, q float64) time.Duration {
	i := int(float64(len(s))*q+0.999999) - 1
	return s[max(0, min(len(s)-1, i))]
}

func spread(v []time.Duration) string {
	lo, hi := slices.Min(v), slices.Max(v)
	return fmt.Sprintf("%.0f-%.0f", ms(lo), ms(hi))
}

// weight times a weight change through the API beside ipvsadm -Sn, in turn.
func weight(base, token string, args []string) {
	fs := flag.NewFlagSet("weight", flag.ExitOnError)
	svc := fs.String("service", "s500", "service id")
	srv := fs.String("server", "198.18.0.16:80", "real server id")
	n := fs.Int("n", 7, "samples of each")
	fs.Parse(args)
	c := newClient(base, token, 1)
	ctx := context.Background()
	path := "/api/v1/services/" + url.PathEscape(*svc) + "/servers/" + url.PathEscape(*srv)
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		log.Fatal(err)
	}
	save := func() time.Duration {
		cmd := exec.Command("ipvsadm", "-Sn")
		cmd.Stdout = devnull
		start := time.Now()
		if err := cmd.Run(); err != nil {
			log.Fatalf("ipvsadm -Sn: %v", err)
		}
		return time.Since(start)
	}
	change := func(w int) time.Duration {
		start := time.Now()
		b, err := c.do(ctx, "PATCH", path, fmt.Sprintf(`{"weight":%d}`, w))
		took := time.Since(start)
		if err != nil {
			log.Fatalf("weight change: %v", err)
		}
		var res struct {
			Changed bool     `json:"changed"`
			Applied bool     `json:"applied"`
			Changes []string `json:"changes"`
		}
		if err := json.Unmarshal(b, &res); err != nil || !res.Changed || !res.Applied || len(res.Changes) != 1 {
			log.Fatalf("weight change to %d was not one applied change: %v %.300s", w, err, b)
		}
		return took
	}
	// The first of each pays one-time costs (connection, page cache): not counted.
	save()
	change(2)
	var saves, changes []time.Duration
	for i := range *n {
		saves = append(saves, save())
		changes = append(changes, change(3+i%2))
	}
	mc, ms0 := median(changes), median(saves)
	fmt.Printf("BENCH serve: one weight change (PATCH %s, kept-alive, answered once the kernel has it): %.0f ms (%s) = %.2fx ipvsadm -Sn (%.0f ms, %s); target <= 0.1x\n",
		path, ms(mc), spread(changes), float64(mc)/float64(ms0), ms(ms0), spread(saves))
}

// latencies runs GETs of path from clients concurrent clients, each
// issuing requests until requests are done in all or duration has passed;
// requests in flight then finish, within inflight. It returns each finished
// request's time, how many failed (or did not finish) and the first error.
func latencies(c *client, path string, clients, requests int, duration, inflight time.Duration) ([]time.Duration, time.Duration, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), duration+inflight)
	defer cancel()
	var next atomic.Int64
	stopAt := time.Now().Add(duration)
	var mu sync.Mutex
	var all []time.Duration
	var failed int
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(requests) && time.Now().Before(stopAt) {
				t0 := time.Now()
				_, err := c.do(ctx, "GET", path, "")
				took := time.Since(t0)
				mu.Lock()
				if err != nil {
					failed++
					if firstErr == nil {
						firstErr = err
					}
				} else {
					all = append(all, took)
				}
				mu.Unlock()
				if err != nil {
					return // a client whose request failed stops: no hammering
				}
			}
		}()
	}
	wg.Wait()
	slices.Sort(all)
	return all, time.Since(start), failed, firstErr
}

// kernelReads is the daemon's ipvsctl_kernel_reads_total.
func kernelReads(c *client) float64 {
	b, err := c.do(context.Background(), "GET", "/metrics", "")
	if err != nil {
		log.Fatalf("read the daemon's metrics: %v", err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "ipvsctl_kernel_reads_total "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	log.Fatal("the daemon's metrics have no ipvsctl_kernel_reads_total")
	return 0
}

// staticServer serves size bytes as a file with net/http's file server on
// loopback, in this process (the daemon has no static route of that size).
func staticServer(size int) (string, func()) {
	dir, err := os.MkdirTemp("", "apiclient")
	if err != nil {
		log.Fatal(err)
	}
	body := []byte(strings.Repeat("x", size))
	if err := os.WriteFile(filepath.Join(dir, "static"), body, 0o644); err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(dir)), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close(); os.RemoveAll(dir) }
}

func load(base, token string, args []string) {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	clients := fs.Int("clients", 20, "concurrent clients, each on its own kept-alive connection")
	requests := fs.Int("requests", 2000, "requests per run at most")
	duration := fs.Duration("duration", 30*time.Second, "time per run at most to issue requests")
	inflight := fs.Duration("inflight", 5*time.Minute, "how long requests in flight at the end may still take")
	fs.Parse(args)
	c := newClient(base, token, *clients)
	start := time.Now()
	before := kernelReads(c)
	for _, path := range []string{"/api/v1/status", "/metrics"} {
		body, err := c.do(context.Background(), "GET", path, "") // warm, and the size to match
		if err != nil {
			log.Fatal(err)
		}
		lat, took, failed, ferr := latencies(c, path, *clients, *requests, *duration, *inflight)
		surl, stop := staticServer(len(body))
		sc := newClient(surl, "", *clients)
		if _, err := sc.do(context.Background(), "GET", "/static", ""); err != nil {
			log.Fatal(err)
		}
		slat, stook, sfailed, _ := latencies(sc, "/static", *clients, *requests, *duration, *inflight)
		stop()
		if len(lat) == 0 || len(slat) == 0 {
			fmt.Printf("BENCH serve: GET %-14s %d clients: no request finished (%d failed; first: %v)\n", path, *clients, failed, ferr)
			continue
		}
		p50, p99 := quantile(lat, 0.5), quantile(lat, 0.99)
		s50, s99 := quantile(slat, 0.5), quantile(slat, 0.99)
		fmt.Printf("BENCH serve: GET %-14s %d clients, %d requests in %.1f s (%d bytes each): p50 %.0f ms, p99 %.0f ms = %.1fx / %.1fx the static floor (p50 %.1f ms, p99 %.1f ms; %d requests in %.1f s); target p99 <= 3x\n",
			path, *clients, len(lat), took.Seconds(), len(body), ms(p50), ms(p99), float64(p50)/float64(s50), float64(p99)/float64(s99),
			ms(s50), ms(s99), len(slat), stook.Seconds())
		if failed > 0 || sfailed > 0 {
			fmt.Printf("BENCH serve:   GET %s: %d requests failed or did not finish within %s (first: %v); static: %d\n", path, failed, *duration+*inflight, ferr, sfailed)
		}
	}
	after := kernelReads(c)
	window := time.Since(start).Seconds()
	fmt.Printf("BENCH serve: kernel table reads by the daemon over the whole load (%.0f s, both routes and their floors): %.0f; its 2 s poll and 10 s full reconcile alone make %.0f\n",
		window, after-before, window/2+window/10)
	fmt.Println("BENCH serve:   (static floor: the same number of bytes from net/http's FileServer in the benchmark client's own process on loopback, loaded the same way; the daemon has no static route of that size)")
}
