// Package metrics serves the director's Prometheus metrics: the kernel's
// table from the daemon's shared snapshot (never a kernel read per scrape),
// with node_exporter's IPVS labels so existing dashboards work, and the
// daemon's own: desired revision, reconciles, drains, HTTP requests.
package metrics

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/health"
	"github.com/ipvsctl/ipvsctl/server"
)

// Metrics is the daemon's metrics: what it counts as things happen, and
// what it reads from the core at each exposition.
type Metrics struct {
	core       *server.Core
	rendered   server.Rendered[[]byte] // the last exposition, one per change of what the daemon knows
	reconcile  *vec
	recErrors  *vec
	recFailed  *vec
	lastOK     *vec
	repairs    *vec
	repaired   *vec
	draining   *vec
	requests   *vec
	requestDur *vec
	checkDur   *vec
	healthTr   *vec
	quorumRuns *vec
	programs   *vec
	alerts     map[string]*vec // by outcome: sent, failed, dropped
	live       []*vec
	sources    []func(*expo)  // the families read at each exposition
	sizes      map[string]int // the last exposition's families' sizes (m.rendered makes one at a time)
}

// New makes the metrics of core's daemon.
func New(core *server.Core) *Metrics {
	m := &Metrics{core: core}
	f := func(v *vec) *vec { m.live = append(m.live, v); return v }
	m.reconcile = f(newHistogram("ipvsctl_reconcile_duration_seconds",
		"Time one reconcile of the kernel with the desired state took.", exponentialBuckets(0.001, 2.5, 12)))
	m.recErrors = f(newVec("counter", "ipvsctl_reconcile_errors_total",
		"Reconciles that could not run (kernel table or ledger unreadable)."))
	m.recFailed = f(newVec("counter", "ipvsctl_reconcile_failed_changes_total",
		"Kernel changes a reconcile tried that the kernel refused."))
	m.lastOK = f(newVec("gauge", "ipvsctl_last_successful_reconcile_timestamp_seconds",
		"When the last reconcile without a failure ended (Unix time)."))
	m.repairs = f(newVec("counter", "ipvsctl_kernel_drift_repairs_total",
		"Periodic reconciles that found the kernel changed by another process (ipvsadm -C, a module unloaded) and repaired it."))
	m.repaired = f(newVec("counter", "ipvsctl_kernel_drift_repaired_changes_total",
		"Kernel changes those repairs made."))
	m.draining = f(newVec("gauge", "ipvsctl_drains_in_progress",
		"Removed real servers kept at weight 0 until their connections end."))
	m.requests = f(newVec("counter", "ipvsctl_http_requests_total",
		"HTTP requests by route and status code.", "route", "code"))
	m.requestDur = f(newHistogram("ipvsctl_http_request_duration_seconds",
		"HTTP request time by route.", defaultBuckets, "route"))
	m.checkDur = f(newHistogram("ipvsctl_health_check_duration_seconds",
		"Time one health check took, by check type and outcome (pass, fail, fault).", exponentialBuckets(0.0005, 3, 11), "type", "outcome"))
	m.healthTr = f(newVec("counter", "ipvsctl_health_transitions_total",
		"Changes of a real server's health state (to up or down) since the daemon started.", append(append([]string{}, rsLabels...), "to")...))
	m.quorumRuns = f(newVec("counter", "ipvsctl_quorum_programs_total",
		"Runs of a service's quorum_up or quorum_down program, by outcome (failed: a non-zero exit status, a timeout, or no start).",
		"local_address", "local_port", "proto", "local_mark", "program", "outcome"))
	m.programs = f(newVec("counter", "ipvsctl_programs_total",
		"Runs of the document's notify and quorum programs, by program (notify_up, notify_master, quorum_down...) and result (ok, failed, timeout).",
		"program", "result"))
	m.alerts = map[string]*vec{}
	for _, c := range []struct{ outcome, name, help string }{
		{"sent", "ipvsctl_alerts_sent_total", "Alerts delivered, by kind (smtp: a mail the relay accepted; webhook: a post answered 2xx)."},
		{"failed", "ipvsctl_alerts_failed_total", "Alerts given up after their last attempt, by kind."},
		{"dropped", "ipvsctl_alerts_dropped_total", "Alerts dropped unsent from a full queue (the oldest waiting), by kind."},
	} {
		m.alerts[c.outcome] = f(newVec("counter", c.name, c.help, "kind"))
	}
	side := server.DaemonSideOf(core)
	m.sources = []func(*expo){
		(&table{core: core}).write,
		(&redundancy{side: side}).write,
		(&followers{core: core}).write,
		(&bgpCollector{core: core}).write,
		(&checker{core: core}).write,
		func(e *expo) {
			e.family("ipvsctl_kernel_reads_total", "counter",
				"Reads of the kernel's whole IPVS table (the snapshot poll, reconciles, diffs); never one per request.").add(float64(side.KernelReads()))
		},
		goFamilies,
		processFamilies,
	}
	return m
}

// Reconciled records one reconcile (daemon.Daemon.OnReconcile).
func (m *Metrics) Reconciled(r server.ReconcileReport) {
	m.reconcile.observe(r.Duration.Seconds())
	m.draining.set(float64(r.Retiring))
	switch {
	case r.Err != "":
		m.recErrors.add(1)
	case len(r.Failures) > 0:
		m.recFailed.add(float64(len(r.Failures)))
	default:
		m.lastOK.set(float64(r.At.Add(r.Duration).UnixNano()) / 1e9)
	}
}

// Repaired records a repair of the kernel's drift (daemon.Daemon.OnRepair).
func (m *Metrics) Repaired(changes int) {
	m.repairs.add(1)
	m.repaired.add(float64(changes))
}

// Checked records one health check run (daemon.Daemon.OnCheck).
func (m *Metrics) Checked(spec *ipvsmgr.CheckSpec, r health.Result) {
	m.checkDur.observe(r.Duration.Seconds(), spec.Type, r.Outcome.String())
}

// QuorumRun counts one run of a service's quorum_up or quorum_down
// program (daemon.Daemon.OnQuorumRun), by its outcome.
func (m *Metrics) QuorumRun(svc ipvsmgr.ServiceKey, up, failed bool) {
	which, outcome := "quorum_down", "ok"
	if up {
		which = "quorum_up"
	}
	if failed {
		outcome = "failed"
	}
	l := refLabels(ipvsmgr.ServerRef{Service: svc})
	m.quorumRuns.add(1, l[0], l[1], l[4], l[5], which, outcome)
}

// ProgramRan counts one run of a notify or quorum program
// (daemon.Daemon.OnProgramRun).
func (m *Metrics) ProgramRan(name, result string) { m.programs.add(1, name, result) }

// Alert counts one alert of kind (smtp, webhook) sent, failed or dropped
// (daemon.Daemon.OnAlert).
func (m *Metrics) Alert(kind, outcome string) { m.alerts[outcome].add(1, kind) }

// HealthEvent counts a change of a server's state (daemon.Daemon.OnHealthEvent).
func (m *Metrics) HealthEvent(e health.Event) {
	if e.From == e.To {
		return // a weight or fault change
	}
	m.healthTr.add(1, append(refLabels(e.Ref), e.To.String())...)
}

// refLabels are node_exporter's labels of a real server of a service.
func refLabels(ref ipvsmgr.ServerRef) []string {
	k := ref.Service
	addr, port, proto, mark := "", "0", "FWM", ""
	if k.FWMark != 0 {
		mark = fwmarkLabel(k.FWMark)
	} else {
		addr, port = k.Addr.String(), strconv.Itoa(int(k.Port))
		proto = map[string]string{"tcp": "TCP", "udp": "UDP", "sctp": "SCTP"}[ipvsmgr.ProtocolName(k.Protocol)]
	}
	return []string{addr, port, ref.Server.Addr.String(), strconv.Itoa(int(ref.Server.Port)), proto, mark}
}

// fwmarkLabel is a mark as node_exporter's local_mark has it: the eight hex
// digits of /proc/net/ip_vs ("FWM  00000005"), so that a query written for
// node_ipvs_backend_* matches ipvsctl's series too.
func fwmarkLabel(mark uint32) string { return fmt.Sprintf("%08X", mark) }

// Handler serves the metrics in Prometheus' text format. The exposition
// is made once per kernel snapshot (every 2 s), however many scrapers ask:
// a director of 11,000 real servers has some 90,000 series.
func (m *Metrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := m.rendered.Get(m.core.KeyNow(), func() ([]byte, error) { return m.exposition(), nil })
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(body)
	})
}

func (m *Metrics) exposition() []byte {
	e := newExpo(m.sizes)
	for _, v := range m.live {
		v.write(e)
	}
	for _, src := range m.sources {
		src(e)
	}
	m.sizes = e.familySizes()
	return e.bytes()
}

// Instrument counts a route's requests by status code and times them.
func (m *Metrics) Instrument(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r)
		m.requests.add(1, route, strconv.Itoa(sw.code))
		m.requestDur.observe(time.Since(start).Seconds(), route)
	})
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// table reports the kernel's table from the daemon's snapshot at each scrape.
type table struct{ core *server.Core }

var (
	svcLabels = []string{"local_address", "local_port", "proto", "local_mark"}
	rsLabels  = []string{"local_address", "local_port", "remote_address", "remote_port", "proto", "local_mark"}
)

func (t *table) write(e *expo) {
	gauge := func(name, help string, labels ...string) *family { return e.family(name, "gauge", help, labels...) }
	counter := func(name, help string, labels ...string) *family { return e.family(name, "counter", help, labels...) }
	kernel := gauge("ipvsctl_kernel_available", "1 when the kernel's IPVS table could be read.")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := t.core.Status(ctx)
	if err != nil {
		kernel.add(0)
		return
	}
	avail := 0.0
	if v.Kernel.Available {
		avail = 1
	}
	kernel.add(avail)
	gauge("ipvsctl_snapshot_age_seconds", "Age of the kernel table the metrics come from.").add(v.Kernel.Age)
	gauge("ipvsctl_desired_revision", "The desired state's current revision.").add(float64(v.Revision))

	active := gauge("ipvsctl_backend_connections_active", "Active connections to a real server.", rsLabels...)
	inactive := gauge("ipvsctl_backend_connections_inactive", "Inactive connections to a real server.", rsLabels...)
	weight := gauge("ipvsctl_backend_weight", "A real server's weight in the kernel.", rsLabels...)
	lastRun := gauge("ipvsctl_backend_check_last_run_timestamp_seconds", "When a checked real server's check last gave a result (Unix time); absent before its first.", rsLabels...)
	upF := gauge("ipvsctl_backend_up", "1 when a real server gets traffic by its health (up, forced up, or without a check), 0 when it is down or not checked yet.", rsLabels...)
	rsConns := counter("ipvsctl_backend_connections_total", "Connections scheduled to a real server.", rsLabels...)
	rsInPk := counter("ipvsctl_backend_incoming_packets_total", "Packets from clients to a real server.", rsLabels...)
	rsOutPk := counter("ipvsctl_backend_outgoing_packets_total", "Packets from a real server to clients (NAT).", rsLabels...)
	rsInB := counter("ipvsctl_backend_incoming_bytes_total", "Bytes from clients to a real server.", rsLabels...)
	rsOutB := counter("ipvsctl_backend_outgoing_bytes_total", "Bytes from a real server to clients (NAT).", rsLabels...)
	svcConns := counter("ipvsctl_service_connections_total", "Connections to a virtual service.", svcLabels...)
	svcInPk := counter("ipvsctl_service_incoming_packets_total", "Packets to a virtual service.", svcLabels...)
	svcOutPk := counter("ipvsctl_service_outgoing_packets_total", "Packets from a virtual service (NAT).", svcLabels...)
	svcInB := counter("ipvsctl_service_incoming_bytes_total", "Bytes to a virtual service.", svcLabels...)
	svcOutB := counter("ipvsctl_service_outgoing_bytes_total", "Bytes from a virtual service (NAT).", svcLabels...)
	sl, rl := make([]string, 4), make([]string, 6)
	for _, s := range v.Services {
		// node_exporter's labels: a fwmark service has an empty address and port 0.
		proto, port, mark := s.Protocol, strconv.Itoa(int(s.Port)), ""
		if s.FWMark != 0 {
			proto, mark = "FWM", fwmarkLabel(s.FWMark)
		} else {
			proto = map[string]string{"tcp": "TCP", "udp": "UDP", "sctp": "SCTP"}[proto]
		}
		sl[0], sl[1], sl[2], sl[3] = s.Address, port, proto, mark
		svcConns.add(float64(s.Stats.Conns), sl...)
		svcInPk.add(float64(s.Stats.InPkts), sl...)
		svcOutPk.add(float64(s.Stats.OutPkts), sl...)
		svcInB.add(float64(s.Stats.InBytes), sl...)
		svcOutB.add(float64(s.Stats.OutBytes), sl...)
		for _, d := range s.Servers {
			rl[0], rl[1], rl[2], rl[3], rl[4], rl[5] = s.Address, port, d.Address, strconv.Itoa(int(d.Port)), proto, mark
			if h := d.Health; h == nil || h.Phase != "sorry server" {
				up := 1.0
				if h != nil && h.State != "up" {
					up = 0
				}
				upF.add(up, rl...)
			}
			if h := d.Health; h != nil && h.LastCheck != nil {
				lastRun.add(float64(h.LastCheck.UnixNano())/1e9, rl...)
			}
			if d.Health != nil && !d.Health.InKernel {
				weight.add(0, rl...)
				continue // listed for its health; the kernel has no counters for it
			}
			active.add(float64(d.ActiveConns), rl...)
			inactive.add(float64(d.InactiveConns), rl...)
			weight.add(float64(d.Weight), rl...)
			rsConns.add(float64(d.Stats.Conns), rl...)
			rsInPk.add(float64(d.Stats.InPkts), rl...)
			rsOutPk.add(float64(d.Stats.OutPkts), rl...)
			rsInB.add(float64(d.Stats.InBytes), rl...)
			rsOutB.add(float64(d.Stats.OutBytes), rl...)
		}
	}
}
