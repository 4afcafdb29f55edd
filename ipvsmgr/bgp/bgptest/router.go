// Package bgptest runs a real GoBGP speaker standing for an upstream router,
// for tests of the speaker and the daemon.
//
// The router runs in a child process (the test binary started again), not
// beside the speaker under test: GoBGP v4.8.0 keeps its route selection
// options in package variables (table.SelectionOptions and
// table.UseMultiplePaths, internal/pkg/table/destination.go) that every
// StartBgp writes (pkg/server/server.go, StartBgp) and every best-path
// computation reads, so two GoBGP servers in one process race. A package
// whose tests use StartRouter runs the child from its TestMain:
//
//	func TestMain(m *testing.M) { bgptest.Main(m) }
package bgptest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// childEnv makes the test binary the router (see Main); keyEnv gives it
// the TCP MD5 key of its session (StartRouterWithKey).
const (
	childEnv = "IPVSCTL_BGPTEST_ROUTER"
	keyEnv   = "IPVSCTL_BGPTEST_MD5"
)

// Main runs the package's tests, or, in the child StartRouter starts, the
// router: it never returns.
func Main(m *testing.M) {
	if os.Getenv(childEnv) == "" {
		os.Exit(m.Run())
	}
	if err := serveRouter(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bgptest router:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Router is a GoBGP speaker of AS 65000 on 127.0.0.2:Port that takes a
// session from 127.0.0.1, AS 65001, in a child process.
type Router struct {
	Port int

	mu  sync.Mutex
	in  io.WriteCloser
	out *bufio.Reader
}

// StartRouter starts one; it stops when the test ends.
func StartRouter(t testing.TB) *Router {
	t.Helper()
	return StartRouterWithKey(t, "")
}

// StartRouterWithKey starts one whose session is signed with TCP MD5 key
// (none when key is ""): the kernel drops the segments of a speaker
// without the same key.
func StartRouterWithKey(t testing.TB, key string) *Router {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", keyEnv+"="+key)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("router's stdin: %v", err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("router's stdout: %v", err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the router's process: %v", err)
	}
	r := &Router{in: in, out: bufio.NewReader(outPipe)}
	t.Cleanup(func() {
		in.Close() // the router stops at the end of its input
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("router's process: %v\n%s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("router's process did not stop within 10 s\n%s", stderr.String())
		}
	})
	var hello struct{ Port int }
	line, err := r.out.ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &hello)
	}
	if err != nil || hello.Port == 0 {
		t.Fatalf("the router did not start (%v; %q); a package using bgptest needs func TestMain(m *testing.M) { bgptest.Main(m) }\n%s", err, line, stderr.String())
	}
	r.Port = hello.Port
	return r
}

type request struct {
	Op     string `json:"op"` // route, aspath, established
	Prefix string `json:"prefix,omitempty"`
}

type answer struct {
	Error   string   `json:"error,omitempty"`
	OK      bool     `json:"ok"`
	Nexthop string   `json:"nexthop,omitempty"`
	Attrs   []string `json:"attrs,omitempty"`
	Path    []uint32 `json:"path,omitempty"`
}

func (r *Router) ask(t testing.TB, req request) answer {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	b, _ := json.Marshal(req)
	if _, err := r.in.Write(append(b, '\n')); err != nil {
		t.Fatalf("ask the router %s: %v", req.Op, err)
	}
	line, err := r.out.ReadBytes('\n')
	var a answer
	if err == nil {
		err = json.Unmarshal(line, &a)
	}
	if err != nil {
		t.Fatalf("the router's answer to %s: %v (%q)", req.Op, err, line)
	}
	if a.Error != "" {
		t.Fatalf("router %s: %s", req.Op, a.Error)
	}
	return a
}

// Route is the router's path to prefix (as "198.18.0.100/32"): its next
// hop and its attributes as text; ok is false when it has none.
func (r *Router) Route(t testing.TB, prefix string) (nexthop string, attrs []string, ok bool) {
	t.Helper()
	a := r.ask(t, request{Op: "route", Prefix: prefix})
	return a.Nexthop, a.Attrs, a.OK
}

// Established says whether the router's session with 127.0.0.1 is up.
func (r *Router) Established(t testing.TB) bool {
	t.Helper()
	return r.ask(t, request{Op: "established"}).OK
}

// ASPath is the AS path of the router's route to prefix, as the AS numbers
// in order; ok is false when it has no route.
func (r *Router) ASPath(t testing.TB, prefix string) (path []uint32, ok bool) {
	t.Helper()
	a := r.ask(t, request{Op: "aspath", Prefix: prefix})
	return a.Path, a.OK
}

// serveRouter is the child: it starts the router, writes its port, then
// answers one request a line until its input ends, and stops the router.
func serveRouter(in io.Reader, out io.Writer) error {
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		return fmt.Errorf("find a port on 127.0.0.2: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := server.NewBgpServer(server.LoggerOption(slog.New(slog.DiscardHandler), &slog.LevelVar{}))
	go s.Serve()
	defer s.Stop()
	ctx := context.Background()
	if err := s.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: 65000, RouterId: "198.18.0.254", ListenPort: int32(port), ListenAddresses: []string{"127.0.0.2"}}}); err != nil {
		return fmt.Errorf("start router: %w", err)
	}
	if err := s.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: "127.0.0.1", PeerAsn: 65001, AuthPassword: os.Getenv(keyEnv)},
		Transport: &api.Transport{PassiveMode: true, LocalAddress: "127.0.0.2"},
	}}); err != nil {
		return fmt.Errorf("router add peer: %w", err)
	}
	enc := json.NewEncoder(out)
	if err := enc.Encode(struct{ Port int }{port}); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var req request
		var a answer
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			a.Error = err.Error()
		} else if err := answerRequest(s, req, &a); err != nil {
			a.Error = err.Error()
		}
		if err := enc.Encode(a); err != nil {
			return err
		}
	}
	return sc.Err()
}

func answerRequest(s *server.BgpServer, req request, a *answer) error {
	switch req.Op {
	case "established":
		return s.ListPeer(context.Background(), &api.ListPeerRequest{}, func(p *api.Peer) {
			a.OK = a.OK || p.GetState().GetSessionState() == api.PeerState_SESSION_STATE_ESTABLISHED
		})
	case "route", "aspath":
		return s.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: bgp.RF_IPv4_UC}, func(n bgp.NLRI, paths []*apiutil.Path) {
			if n.String() != req.Prefix || len(paths) == 0 {
				return
			}
			a.OK = true
			if req.Op == "aspath" {
				for _, at := range paths[0].Attrs {
					if ap, isAP := at.(*bgp.PathAttributeAsPath); isAP {
						for _, seg := range ap.Value {
							a.Path = append(a.Path, seg.GetAS()...)
						}
					}
				}
				return
			}
			for _, p := range paths {
				for _, at := range p.Attrs {
					a.Attrs = append(a.Attrs, at.String())
					if nh, isNH := at.(*bgp.PathAttributeNextHop); isNH {
						a.Nexthop = nh.Value.String()
					}
				}
			}
		})
	}
	return fmt.Errorf("unknown request %q", req.Op)
}
