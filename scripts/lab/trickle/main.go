// Command trickle is the lab's client: it sends a bounded trickle of HTTP
// requests, each on a new connection (so IPVS counts each), to every URL at a
// fixed rate, until it has sent its total or is told to stop.
//
//	trickle [-rate 2] [-requests 10000] URL...
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	rate := flag.Float64("rate", 2, "requests a second to each URL")
	total := flag.Int("requests", 10000, "requests to each URL in all")
	flag.Parse()
	if flag.NArg() == 0 || *rate <= 0 || *rate > 1000 || *total < 0 {
		fmt.Fprintln(os.Stderr, "usage: trickle [-rate N (0..1000]] [-requests N] URL...")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil},
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / *rate))
	defer tick.Stop()
	failed := 0
	for sent := 0; sent < *total; sent++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, url := range flag.Args() {
			if err := get(ctx, client, url); err != nil {
				failed++
				if failed == 1 || failed%100 == 0 {
					fmt.Fprintf(os.Stderr, "trickle: %d requests failed; the last: %v\n", failed, err)
				}
			}
		}
	}
}

func get(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}
