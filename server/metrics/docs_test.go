package metrics

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestDocsNameOnlyExportedMetrics: every ipvsctl_* series that the shipped
// alerting rules (docs/prometheus/alerts.yml) and Grafana dashboard
// (docs/grafana/ipvsctl.json) query is one this package exports (a name in
// its source, histograms with their _bucket/_sum/_count), so a rename here
// cannot leave them querying nothing.
func TestDocsNameOnlyExportedMetrics(t *testing.T) {
	exported := map[string]bool{}
	fset := token.NewFileSet()
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && strings.HasPrefix(s, "ipvsctl_") {
					exported[s] = true
					for _, suf := range []string{"_bucket", "_sum", "_count"} {
						exported[s+suf] = true
					}
				}
			}
			return true
		})
	}
	if len(exported) < 20 {
		t.Fatalf("found only %d metric names in the package's source", len(exported))
	}
	name := regexp.MustCompile(`ipvsctl_[a-z_]+`)
	alerts, err := os.ReadFile("../../docs/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	dashboard, err := os.ReadFile("../../docs/grafana/ipvsctl.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(dashboard, &dash); err != nil {
		t.Fatalf("docs/grafana/ipvsctl.json: %v", err)
	}
	var exprs []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	if len(exprs) < 15 {
		t.Errorf("the dashboard has %d queries", len(exprs))
	}
	used := map[string]string{}
	for _, n := range name.FindAllString(string(alerts), -1) {
		used[n] = "alerts.yml"
	}
	for _, e := range exprs {
		for _, n := range name.FindAllString(e, -1) {
			used[n] = "ipvsctl.json"
		}
	}
	var missing []string
	for n, where := range used {
		if !exported[n] {
			missing = append(missing, n+" ("+where+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("queried but not exported: %s", strings.Join(missing, ", "))
	}
	// The dashboard covers each part the issue lists.
	for _, want := range []string{"ipvsctl_service_connections_total", "ipvsctl_backend_connections_active", "ipvsctl_backend_up",
		"ipvsctl_vrrp_state", "ipvsctl_replication_lag_seconds", "ipvsctl_reconcile_duration_seconds_bucket"} {
		if used[want] != "ipvsctl.json" && !strings.Contains(strings.Join(exprs, " "), want) {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
}
