package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// settings.maintenance_dir on a real directory, read by the running daemon:
// a file named for a real server's address quiesces it in both services, one
// named ADDRESS:PORT in that port's service only, one named for a host (its
// addresses) too; the status, the states and the why view say which file;
// removing the files puts the servers back at their weight.
func TestDaemonMaintenanceDir(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	maint := filepath.Join(dir, "maintenance")
	if err := os.Mkdir(maint, 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, filepath.Join(dir, "ipvsctl.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	doc := fmt.Sprintf(`{"settings": {"maintenance_dir": %q}, "services": [
  {"name": "web", "address": "198.18.0.100", "port": 80, "forwarding": "nat",
   "servers": [{"name": "r1", "address": "198.18.0.11", "weight": 3}, {"name": "r2", "address": "198.18.0.12", "weight": 2},
               {"name": "r3", "address": "198.18.0.13"}]},
  {"name": "tls", "address": "198.18.0.100", "port": 443, "forwarding": "nat",
   "servers": [{"name": "r1", "address": "198.18.0.11", "weight": 3}, {"name": "r2", "address": "198.18.0.12", "weight": 2},
               {"name": "r3", "address": "198.18.0.13"}]}]}`, maint)
	k := fakekernel.New()
	core := server.New(server.Config{Store: st, OpenKernel: openFake(k, nil)})
	d := New(core, st, slog.New(slog.DiscardHandler))
	d.Interval, d.Poll = time.Hour, 20*time.Millisecond
	d.maint.lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
		if host == "web3" {
			return []netip.Addr{netip.MustParseAddr("198.18.0.13")}, nil
		}
		return nil, fmt.Errorf("lookup %s: no such host", host)
	}
	dctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(dctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	state, err := ipvsmgr.DecodeState(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := applyState(ctx, core, server.Actor{Name: "t", Via: "test"}, state, "test"); err != nil {
		t.Fatal(err)
	}
	weights := func() string {
		tbl, _ := k.Table(ctx)
		var out []string
		for _, s := range tbl.Services {
			for _, dst := range s.Dests {
				out = append(out, fmt.Sprintf("%d %s=%d", s.Key.Port, dst.Key, dst.Weight))
			}
		}
		slices.Sort(out)
		return strings.Join(out, ", ")
	}
	waitWeights := func(want string) {
		t.Helper()
		for ctx.Err() == nil {
			if weights() == want {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("kernel:\n got %s\nwant %s", weights(), want)
	}
	touch := func(name string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(maint, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const all = "443 198.18.0.11:443=3, 443 198.18.0.12:443=2, 443 198.18.0.13:443=1, 80 198.18.0.11:80=3, 80 198.18.0.12:80=2, 80 198.18.0.13:80=1"
	waitWeights(all)
	touch("198.18.0.11")
	touch("198.18.0.12:443")
	touch("web3")
	touch("README") // not a server's name: left alone
	waitWeights("443 198.18.0.11:443=0, 443 198.18.0.12:443=0, 443 198.18.0.13:443=0, 80 198.18.0.11:80=0, 80 198.18.0.12:80=2, 80 198.18.0.13:80=0")

	view, err := core.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ss := range view.States {
		for _, sr := range ss.Servers {
			want := map[string]string{"web r1": "198.18.0.11", "tls r1": "198.18.0.11", "tls r2": "198.18.0.12:443", "web r3": "web3", "tls r3": "web3"}[ss.Name+" "+sr.Name]
			got := sr.State + ": " + sr.Reason
			switch {
			case want != "" && got != "drained: maintenance file "+filepath.Join(maint, want):
				t.Errorf("%s %s: %q, want drained by %s", ss.Name, sr.Name, got, want)
			case want == "" && sr.State != server.StateUp:
				t.Errorf("%s %s: %q, want up", ss.Name, sr.Name, got)
			}
		}
	}
	why, err := core.Why(ctx, "web", "r1")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(why.Checks, func(c server.WhyCheck) bool {
		return c.Reason == server.ReasonMaintenance && strings.Contains(c.Detail, filepath.Join(maint, "198.18.0.11"))
	}) {
		t.Errorf("why web r1: %+v, want the maintenance file", why.Checks)
	}

	for _, name := range []string{"198.18.0.11", "198.18.0.12:443", "web3"} {
		if err := os.Remove(filepath.Join(maint, name)); err != nil {
			t.Fatal(err)
		}
	}
	waitWeights(all)
}
