package httpd_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/ipvsmgrtest"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/client"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// A daemon with real tcp checks against local listeners: r1's answers, r2's
// port is closed. Its health shows in the status, the health report, the
// metrics, and a check can be run on demand.
func TestHealthThroughTheAPI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g := servertest.Start(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ipvsmgrtest.AcceptAndClose(ln)
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	doc := fmt.Sprintf(`{"services":[{"name":"web","address":"198.18.0.100","port":80,"scheduler":"wrr",
 "check": {"type": "tcp", "address": "127.0.0.1", "interval": 0.1, "timeout": 0.5, "rise": 1, "fall": 1, "on_failure": "remove"},
 "servers":[{"name":"r1","address":"198.18.0.11","weight":3,"check":{"port":%d}},
            {"name":"r2","address":"198.18.0.12","weight":1,"check":{"port":%d}}]}]}`,
		ln.Addr().(*net.TCPAddr).Port, closedPort)
	if resp, body := do(t, g, g.Tokens[auth.Admin], "PUT", "/api/v1/state", doc); resp.StatusCode != 200 {
		t.Fatalf("PUT /state: %s %s", resp.Status, body)
	}
	viewer, _ := client.New(g.URL, g.Tokens[auth.Viewer])
	var reports []server.HealthReport
	for {
		if reports, err = viewer.Health(ctx, server.HealthQuery{Service: "web"}); err != nil {
			t.Fatal(err)
		}
		// The transitions are kept a moment after the phase changes.
		if len(reports) == 2 && reports[0].Phase == "up" && reports[1].Phase == "down" && len(reports[1].Transitions) > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("timed out waiting for r1 up and r2 down: %+v", reports)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := reports[1]; r.Name != "r2" || r.LastResult != "connection refused" || len(r.Transitions) == 0 || r.EffectiveWeight != 0 || r.ConfiguredWeight != 1 {
		t.Errorf("r2's report = %+v", r)
	}
	// The status shows both: r1 from the kernel, r2 out of it but listed.
	var v *server.StatusView
	for {
		if v, err = viewer.Status(ctx); err != nil {
			t.Fatal(err)
		}
		if len(v.Services) == 1 && len(v.Services[0].Servers) == 2 && v.Services[0].Servers[0].Health != nil && v.Services[0].Servers[0].Health.InKernel {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("timed out waiting for the status: %+v", v)
		}
		time.Sleep(20 * time.Millisecond)
	}
	r1, r2 := v.Services[0].Servers[0], v.Services[0].Servers[1]
	if r1.Address != "198.18.0.11" || r1.Health.Phase != "up" || r1.Weight != 3 {
		t.Errorf("r1 in the status = %+v %+v", r1, r1.Health)
	}
	if r2.Address != "198.18.0.12" || r2.Health == nil || r2.Health.InKernel || r2.Health.Phase != "down" {
		t.Errorf("r2 in the status = %+v %+v", r2, r2.Health)
	}
	_, metrics := do(t, g, g.Tokens[auth.Viewer], "GET", "/metrics", "")
	for _, want := range []string{
		`ipvsctl_backend_up{local_address="198.18.0.100",local_mark="",local_port="80",proto="TCP",remote_address="198.18.0.11",remote_port="80"} 1`,
		`ipvsctl_backend_up{local_address="198.18.0.100",local_mark="",local_port="80",proto="TCP",remote_address="198.18.0.12",remote_port="80"} 0`,
		`ipvsctl_health_transitions_total{local_address="198.18.0.100",local_mark="",local_port="80",proto="TCP",remote_address="198.18.0.12",remote_port="80",to="down"} 1`,
		`ipvsctl_health_check_duration_seconds_count{outcome="fail",type="tcp"}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// Check now: an operator may, a viewer may not.
	if resp, _ := do(t, g, g.Tokens[auth.Viewer], "POST", "/api/v1/services/web/servers/r2/check", ""); resp.StatusCode != http.StatusForbidden {
		t.Errorf("viewer check now: %s", resp.Status)
	}
	op, _ := client.New(g.URL, g.Tokens[auth.Operator])
	res, err := op.CheckServer(ctx, server.Actor{}, "web", "r2")
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != "fail" || res.Reason != "connection refused" || res.Check != "tcp" {
		t.Errorf("check now of r2 = %+v", res)
	}
	if res, err := op.CheckServer(ctx, server.Actor{}, "web", "r1"); err != nil || res.Outcome != "pass" {
		t.Errorf("check now of r1 = %+v, %v", res, err)
	}

	// Forced down by an operator: a revision, and r1 leaves the kernel.
	down := "down"
	if _, err := op.PatchServer(ctx, server.Actor{}, "web", "r1", server.ServerPatch{Health: &down}, server.WriteOptions{NoWait: true}); err != nil {
		t.Fatal(err)
	}
	if tbl, _ := g.Kernel.Table(ctx); len(tbl.Services) != 1 || len(tbl.Services[0].Dests) != 0 {
		t.Errorf("after forcing r1 down the kernel has %+v", tbl.Services[0].Dests)
	}
	st, _, _ := viewer.State(ctx)
	if st.Services[0].Servers[0].Health != "down" {
		t.Errorf("forced health not in the document: %+v", st.Services[0].Servers[0])
	}
	auto := "auto"
	if _, err := op.PatchServer(ctx, server.Actor{}, "web", "r1", server.ServerPatch{Health: &auto}, server.WriteOptions{NoWait: true}); err != nil {
		t.Fatal(err)
	}
	if tbl, _ := g.Kernel.Table(ctx); len(tbl.Services[0].Dests) != 1 {
		t.Errorf("after auto the kernel has %+v", tbl.Services[0].Dests)
	}
	if st, _, _ := viewer.State(ctx); st.Services[0].Servers[0].Health != "" {
		t.Errorf("auto kept in the document as %q", st.Services[0].Servers[0].Health)
	}
}
