package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp/bgptest"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/daemon"
)

// TestBGPMetrics scrapes a daemon in BGP mode whose session is with a real
// GoBGP router: the session is up and the VIP announced.
func TestBGPMetrics(t *testing.T) {
	r := bgptest.StartRouter(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	core, st := testCore(t, ctx)
	d := daemon.New(core, st, slog.New(slog.DiscardHandler))
	d.Interval, d.Poll, d.Snapshot = 50*time.Millisecond, 10*time.Millisecond, 50*time.Millisecond
	m := New(core)
	a := server.Actor{Name: "t", Via: "test"}
	rid, src := "198.18.0.1", "127.0.0.1"
	if _, err := core.SetNode(ctx, a, server.NodePatch{RouterID: &rid, BGPSource: &src}); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	defer func() { stop(); <-done }()
	state := &ipvsmgr.State{
		Settings: ipvsmgr.Settings{Network: "dr", BGP: &ipvsmgr.BGP{ASN: 65001, Peers: []ipvsmgr.BGPPeer{{Address: "127.0.0.2", Port: r.Port, ASN: 65000}}}},
		Services: []ipvsmgr.Service{{Name: "web", Protocol: "tcp", Address: "198.18.0.100", Port: 80, Servers: []ipvsmgr.Server{{Address: "198.18.1.11"}}}},
	}
	doc, err := json.Marshal(state)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := core.Apply(ctx, a, bytes.NewReader(doc), "test", server.WriteOptions{NoWait: true}); err != nil {
		t.Fatal(err)
	}
	// Two followers report their Maglev fingerprints here: one has web's
	// inputs, the other another order of them.
	for i, in := range []string{"mh mh-port 198.18.1.11:80/1", "mh mh-port 198.18.1.12:80/1 198.18.1.11:80/1"} {
		rid := []string{"198.18.0.2", "198.18.0.3"}[i]
		fp := bgp.ServiceFingerprint{Service: "web", Key: "tcp 198.18.0.100:80", Fingerprint: []string{"", "00ff00ff00ff00ff"}[i], Inputs: in}
		if i == 0 { // the same as this director's
			for core.BGPStatus() == nil || len(core.BGPStatus().Fingerprints) == 0 {
				if ctx.Err() != nil {
					t.Fatal("no fingerprints of its own")
				}
				time.Sleep(20 * time.Millisecond)
			}
			fp = core.BGPStatus().Fingerprints[0]
		}
		if _, err := core.ReportFingerprints(server.ReportCaller{Certificate: "cert-" + rid, Addr: "127.0.0.1"},
			server.FingerprintReport{RouterID: rid, Services: []bgp.ServiceFingerprint{fp}}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		`ipvsctl_bgp_session_up{peer="127.0.0.2",peer_asn="65000"} 1`,
		`ipvsctl_bgp_announced_prefixes{peer="127.0.0.2"} 1`,
		`ipvsctl_bgp_vip_announced{prefix="198.18.0.100/32"} 1`,
		`ipvsctl_bgp_maglev_mismatches{director="198.18.0.2"} 0`,
		`ipvsctl_bgp_maglev_mismatches{director="198.18.0.3"} 1`,
		`ipvsctl_bgp_maglev_compared{director="198.18.0.2"} 1`,
		`ipvsctl_bgp_maglev_compared{director="198.18.0.3"} 1`,
	}
	var body string
	for ctx.Err() == nil {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		b, _ := io.ReadAll(rec.Body)
		body = string(b)
		all := true
		for _, w := range want {
			all = all && strings.Contains(body, w)
		}
		if all {
			if strings.Contains(body, "ipvsctl_bfd_session_up") {
				t.Error("a BFD metric for a peer without bfd")
			}
			if strings.Contains(body, "ipvsctl_bgp_drain{") {
				t.Error("a drain phase while not drained")
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Fatalf("metrics never showed %q:\n%s", want, body)
	}
	drained := true
	if _, err := core.SetNode(ctx, a, server.NodePatch{Drained: &drained}); err != nil {
		t.Fatal(err)
	}
	for ctx.Err() == nil {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		b, _ := io.ReadAll(rec.Body)
		if body = string(b); strings.Contains(body, `ipvsctl_bgp_drain{phase="draining"} 1`) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("metrics never showed the drain:\n%s", body)
}
