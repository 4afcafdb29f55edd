package health

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// countingServer is an HTTP server on loopback that counts the connections
// that asked for something (the full check) apart from those that only
// connected (the connect checks between).
type countingServer struct {
	ln net.Listener
	wg sync.WaitGroup

	mu                 sync.Mutex
	requests, connects int
	status             int
}

func newCountingServer(t *testing.T) *countingServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &countingServer{ln: ln, status: 200}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(c)
			}()
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *countingServer) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || line == "" {
		s.connects++ // connected and went: a connect check
		return
	}
	s.requests++
	fmt.Fprintf(c, "HTTP/1.0 %d X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", s.status)
}

func (s *countingServer) close() { s.ln.Close(); s.wg.Wait() }

func (s *countingServer) setStatus(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = code
}

// counts waits (boundedly: a connect check's result can come before the
// server has seen the connection end) for the server to have seen want
// connections, and returns what it saw.
func (s *countingServer) counts(want int) (requests, connects int) {
	for range 500 {
		s.mu.Lock()
		requests, connects = s.requests, s.connects
		s.mu.Unlock()
		if requests+connects >= want {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return requests, connects
}

// checktype = 2 against a real HTTP server: a full check, then two connects
// after each full check that passes; a full check that fails is followed by
// a full check; a connect that fails, by a full check. The real checker
// runs every one of them; the server counts what it got.
func TestConnectChecksBetweenFullChecks(t *testing.T) {
	srv := newCountingServer(t)
	port := srv.ln.Addr().(*net.TCPAddr).Port
	d := compile(t, fmt.Sprintf(`{"services":[{"name":"web","address":"198.18.0.100","port":80,
 "check":{"type":"http","port":%d,"address":"127.0.0.1","interval":1,"rise":1,"fall":1,"connect_checks":2},
 "servers":[{"name":"r1","address":"198.18.0.11"}]}]}`, port))
	var mu sync.Mutex
	var kinds []string
	real := &Checker{}
	h := newHarnessWith(t, d, func(ctx context.Context, spec *ipvsmgr.CheckSpec) Result {
		mu.Lock()
		kinds = append(kinds, spec.Type)
		mu.Unlock()
		return real.Run(ctx, spec)
	})
	step := func(n int) {
		t.Helper()
		for range n {
			h.step(time.Second, 1)
		}
	}
	step(5) // full, connect, connect, full, connect
	srv.setStatus(500)
	step(3) // connect; full fails; full again
	srv.setStatus(200)
	step(2) // full passes; connect
	if req, conn := srv.counts(10); req != 5 || conn != 5 {
		t.Errorf("server saw %d requests and %d bare connections, want 5 and 5", req, conn)
	}
	srv.close()
	step(2) // the connect fails; a full check next
	mu.Lock()
	got := slices.Clone(kinds)
	mu.Unlock()
	want := []string{"http", "tcp", "tcp", "http", "tcp", "tcp", "http", "http", "http", "tcp", "tcp", "http"}
	if !slices.Equal(got, want) {
		t.Errorf("runs:\n got %q\nwant %q", got, want)
	}
	wantEvents(t, h.takeEvents(), "r1 unknown->up HTTP 200", "r1 up->down HTTP 500", "r1 down->up HTTP 200", "r1 up->down connection refused flapping") // four changes within a minute
}
