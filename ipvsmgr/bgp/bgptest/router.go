// Package bgptest runs a real GoBGP speaker standing for an upstream router,
// for tests of the speaker and the daemon.
package bgptest

import (
	"context"
	"log/slog"
	"net"
	"testing"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// Router is a GoBGP speaker of AS 65000 on 127.0.0.2:Port that takes a
// session from 127.0.0.1, AS 65001.
type Router struct {
	s    *server.BgpServer
	Port int
}

// StartRouter starts one; it stops when the test ends.
func StartRouter(t testing.TB) *Router {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("find a port on 127.0.0.2: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := server.NewBgpServer(server.LoggerOption(slog.New(slog.DiscardHandler), &slog.LevelVar{}))
	go s.Serve()
	ctx := context.Background()
	if err := s.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: 65000, RouterId: "198.18.0.254", ListenPort: int32(port), ListenAddresses: []string{"127.0.0.2"}}}); err != nil {
		t.Fatalf("start router: %v", err)
	}
	if err := s.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: "127.0.0.1", PeerAsn: 65001},
		Transport: &api.Transport{PassiveMode: true, LocalAddress: "127.0.0.2"},
	}}); err != nil {
		t.Fatalf("router add peer: %v", err)
	}
	t.Cleanup(func() {
		_ = s.StopBgp(context.Background(), &api.StopBgpRequest{})
		s.Stop()
	})
	return &Router{s: s, Port: port}
}

// Route is the router's path to prefix (as "198.18.0.100/32"): its next
// hop and its attributes as text; ok is false when it has none.
func (r *Router) Route(t testing.TB, prefix string) (nexthop string, attrs []string, ok bool) {
	t.Helper()
	err := r.s.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: bgp.RF_IPv4_UC}, func(n bgp.NLRI, paths []*apiutil.Path) {
		if n.String() != prefix {
			return
		}
		for _, p := range paths {
			ok = true
			for _, a := range p.Attrs {
				attrs = append(attrs, a.String())
				if nh, isNH := a.(*bgp.PathAttributeNextHop); isNH {
					nexthop = nh.Value.String()
				}
			}
		}
	})
	if err != nil {
		t.Fatalf("router list paths: %v", err)
	}
	return nexthop, attrs, ok
}

// Established says whether the router's session with 127.0.0.1 is up.
func (r *Router) Established(t testing.TB) bool {
	t.Helper()
	up := false
	err := r.s.ListPeer(context.Background(), &api.ListPeerRequest{}, func(p *api.Peer) {
		up = up || p.GetState().GetSessionState() == api.PeerState_SESSION_STATE_ESTABLISHED
	})
	if err != nil {
		t.Fatalf("router list peers: %v", err)
	}
	return up
}

// ASPath is the AS path of the router's route to prefix, as the AS numbers
// in order; ok is false when it has no route.
func (r *Router) ASPath(t testing.TB, prefix string) (path []uint32, ok bool) {
	t.Helper()
	err := r.s.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: bgp.RF_IPv4_UC}, func(n bgp.NLRI, paths []*apiutil.Path) {
		if n.String() != prefix || len(paths) == 0 {
			return
		}
		ok = true
		for _, a := range paths[0].Attrs {
			if ap, isAP := a.(*bgp.PathAttributeAsPath); isAP {
				for _, seg := range ap.Value {
					path = append(path, seg.GetAS()...)
				}
			}
		}
	})
	if err != nil {
		t.Fatalf("router list paths: %v", err)
	}
	return path, ok
}
