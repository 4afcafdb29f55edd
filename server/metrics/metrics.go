// Package metrics serves the director's Prometheus metrics: the kernel's
// table from the daemon's shared snapshot (never a kernel read per scrape),
// with node_exporter's IPVS labels so existing dashboards work, and the
// daemon's own: desired revision, reconciles, drains, HTTP requests.
package metrics

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/health"
	"github.com/ipvsctl/ipvsctl/server"
)

// Metrics is the daemon's registry.
type Metrics struct {
	core       *server.Core
	reg        *prometheus.Registry
	rendered   server.Rendered[[]byte] // the last exposition, one per change of what the daemon knows
	reconcile  prometheus.Histogram
	recErrors  prometheus.Counter
	recFailed  prometheus.Counter
	lastOK     prometheus.Gauge
	repairs    prometheus.Counter
	repaired   prometheus.Counter
	draining   prometheus.Gauge
	requests   *prometheus.CounterVec
	requestDur *prometheus.HistogramVec
	checkDur   *prometheus.HistogramVec
	healthTr   *prometheus.CounterVec
	quorumRuns *prometheus.CounterVec
	programs   *prometheus.CounterVec
	alerts     map[string]*prometheus.CounterVec // by outcome: sent, failed, dropped
}

// New registers the metrics of core's daemon.
func New(core *server.Core) *Metrics {
	m := &Metrics{core: core, reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	m.reconcile = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ipvsctl_reconcile_duration_seconds",
		Help: "Time one reconcile of the kernel with the desired state took.", Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12)})
	m.recErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "ipvsctl_reconcile_errors_total",
		Help: "Reconciles that could not run (kernel table or ledger unreadable)."})
	m.recFailed = prometheus.NewCounter(prometheus.CounterOpts{Name: "ipvsctl_reconcile_failed_changes_total",
		Help: "Kernel changes a reconcile tried that the kernel refused."})
	m.lastOK = prometheus.NewGauge(prometheus.GaugeOpts{Name: "ipvsctl_last_successful_reconcile_timestamp_seconds",
		Help: "When the last reconcile without a failure ended (Unix time)."})
	m.repairs = prometheus.NewCounter(prometheus.CounterOpts{Name: "ipvsctl_kernel_drift_repairs_total",
		Help: "Periodic reconciles that found the kernel changed by another process (ipvsadm -C, a module unloaded) and repaired it."})
	m.repaired = prometheus.NewCounter(prometheus.CounterOpts{Name: "ipvsctl_kernel_drift_repaired_changes_total",
		Help: "Kernel changes those repairs made."})
	m.draining = prometheus.NewGauge(prometheus.GaugeOpts{Name: "ipvsctl_drains_in_progress",
		Help: "Removed real servers kept at weight 0 until their connections end."})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ipvsctl_http_requests_total",
		Help: "HTTP requests by route and status code."}, []string{"route", "code"})
	m.requestDur = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ipvsctl_http_request_duration_seconds",
		Help: "HTTP request time by route.", Buckets: prometheus.DefBuckets}, []string{"route"})
	m.checkDur = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ipvsctl_health_check_duration_seconds",
		Help:    "Time one health check took, by check type and outcome (pass, fail, fault).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 3, 11)}, []string{"type", "outcome"})
	m.healthTr = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ipvsctl_health_transitions_total",
		Help: "Changes of a real server's health state (to up or down) since the daemon started."}, append(append([]string{}, rsLabels...), "to"))
	f(m.checkDur)
	f(m.healthTr)
	m.quorumRuns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ipvsctl_quorum_programs_total",
		Help: "Runs of a service's quorum_up or quorum_down program, by outcome (failed: a non-zero exit status, a timeout, or no start)."},
		[]string{"local_address", "local_port", "proto", "local_mark", "program", "outcome"})
	f(m.quorumRuns)
	m.programs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ipvsctl_programs_total",
		Help: "Runs of the document's notify and quorum programs, by program (notify_up, notify_master, quorum_down...) and result (ok, failed, timeout)."},
		[]string{"program", "result"})
	f(m.programs)
	m.alerts = map[string]*prometheus.CounterVec{}
	for _, c := range []struct{ outcome, name, help string }{
		{"sent", "ipvsctl_alerts_sent_total", "Alerts delivered, by kind (smtp: a mail the relay accepted; webhook: a post answered 2xx)."},
		{"failed", "ipvsctl_alerts_failed_total", "Alerts given up after their last attempt, by kind."},
		{"dropped", "ipvsctl_alerts_dropped_total", "Alerts dropped unsent from a full queue (the oldest waiting), by kind."},
	} {
		m.alerts[c.outcome] = prometheus.NewCounterVec(prometheus.CounterOpts{Name: c.name, Help: c.help}, []string{"kind"})
		f(m.alerts[c.outcome])
	}
	f(m.reconcile)
	f(m.recErrors)
	f(m.recFailed)
	f(m.lastOK)
	f(m.repairs)
	f(m.repaired)
	f(m.draining)
	f(m.requests)
	f(m.requestDur)
	f(&table{core: core})
	f(&redundancy{side: server.DaemonSideOf(core)})
	f(&followers{core: core})
	f(&bgpCollector{core: core})
	f(&checker{core: core})
	f(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ipvsctl_kernel_reads_total",
		Help: "Reads of the kernel's whole IPVS table (the snapshot poll, reconciles, diffs); never one per request."},
		func() float64 { return float64(server.DaemonSideOf(core).KernelReads()) }))
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Reconciled records one reconcile (daemon.Daemon.OnReconcile).
func (m *Metrics) Reconciled(r server.ReconcileReport) {
	m.reconcile.Observe(r.Duration.Seconds())
	m.draining.Set(float64(r.Retiring))
	switch {
	case r.Err != "":
		m.recErrors.Inc()
	case len(r.Failures) > 0:
		m.recFailed.Add(float64(len(r.Failures)))
	default:
		m.lastOK.Set(float64(r.At.Add(r.Duration).UnixNano()) / 1e9)
	}
}

// Repaired records a repair of the kernel's drift (daemon.Daemon.OnRepair).
func (m *Metrics) Repaired(changes int) {
	m.repairs.Inc()
	m.repaired.Add(float64(changes))
}

// Checked records one health check run (daemon.Daemon.OnCheck).
func (m *Metrics) Checked(spec *ipvsmgr.CheckSpec, r health.Result) {
	m.checkDur.WithLabelValues(spec.Type, r.Outcome.String()).Observe(r.Duration.Seconds())
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
	m.quorumRuns.WithLabelValues(l[0], l[1], l[4], l[5], which, outcome).Inc()
}

// ProgramRan counts one run of a notify or quorum program
// (daemon.Daemon.OnProgramRun).
func (m *Metrics) ProgramRan(name, result string) { m.programs.WithLabelValues(name, result).Inc() }

// Alert counts one alert of kind (smtp, webhook) sent, failed or dropped
// (daemon.Daemon.OnAlert).
func (m *Metrics) Alert(kind, outcome string) { m.alerts[outcome].WithLabelValues(kind).Inc() }

// HealthEvent counts a change of a server's state (daemon.Daemon.OnHealthEvent).
func (m *Metrics) HealthEvent(e health.Event) {
	if e.From == e.To {
		return // a weight or fault change
	}
	m.healthTr.WithLabelValues(append(refLabels(e.Ref), e.To.String())...).Inc()
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

// Handler serves the registry in Prometheus' text format. The exposition is
// made once per kernel snapshot (every 2 s), however many scrapers ask: a
// director of 11,000 real servers has some 90,000 series.
func (m *Metrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := m.exposition()
		if err != nil {
			http.Error(w, "gather metrics: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
		_, _ = w.Write(body)
	})
}

func (m *Metrics) exposition() ([]byte, error) {
	return m.rendered.Get(m.core.KeyNow(), func() ([]byte, error) {
		families, err := m.reg.Gather()
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, f := range families {
			if err := enc.Encode(f); err != nil {
				return nil, err
			}
		}
		return b.Bytes(), nil
	})
}

// Instrument counts a route's requests by status code and times them.
func (m *Metrics) Instrument(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r)
		m.requests.WithLabelValues(route, strconv.Itoa(sw.code)).Inc()
		m.requestDur.WithLabelValues(route).Observe(time.Since(start).Seconds())
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

	descKernel   = prometheus.NewDesc("ipvsctl_kernel_available", "1 when the kernel's IPVS table could be read.", nil, nil)
	descAge      = prometheus.NewDesc("ipvsctl_snapshot_age_seconds", "Age of the kernel table the metrics come from.", nil, nil)
	descRevision = prometheus.NewDesc("ipvsctl_desired_revision", "The desired state's current revision.", nil, nil)

	descActive   = prometheus.NewDesc("ipvsctl_backend_connections_active", "Active connections to a real server.", rsLabels, nil)
	descInactive = prometheus.NewDesc("ipvsctl_backend_connections_inactive", "Inactive connections to a real server.", rsLabels, nil)
	descWeight   = prometheus.NewDesc("ipvsctl_backend_weight", "A real server's weight in the kernel.", rsLabels, nil)
	descLastRun  = prometheus.NewDesc("ipvsctl_backend_check_last_run_timestamp_seconds", "When a checked real server's check last gave a result (Unix time); absent before its first.", rsLabels, nil)
	descUp       = prometheus.NewDesc("ipvsctl_backend_up", "1 when a real server gets traffic by its health (up, forced up, or without a check), 0 when it is down or not checked yet.", rsLabels, nil)
	descRSConns  = prometheus.NewDesc("ipvsctl_backend_connections_total", "Connections scheduled to a real server.", rsLabels, nil)
	descRSInPk   = prometheus.NewDesc("ipvsctl_backend_incoming_packets_total", "Packets from clients to a real server.", rsLabels, nil)
	descRSOutPk  = prometheus.NewDesc("ipvsctl_backend_outgoing_packets_total", "Packets from a real server to clients (NAT).", rsLabels, nil)
	descRSInB    = prometheus.NewDesc("ipvsctl_backend_incoming_bytes_total", "Bytes from clients to a real server.", rsLabels, nil)
	descRSOutB   = prometheus.NewDesc("ipvsctl_backend_outgoing_bytes_total", "Bytes from a real server to clients (NAT).", rsLabels, nil)

	descSvcConns = prometheus.NewDesc("ipvsctl_service_connections_total", "Connections to a virtual service.", svcLabels, nil)
	descSvcInPk  = prometheus.NewDesc("ipvsctl_service_incoming_packets_total", "Packets to a virtual service.", svcLabels, nil)
	descSvcOutPk = prometheus.NewDesc("ipvsctl_service_outgoing_packets_total", "Packets from a virtual service (NAT).", svcLabels, nil)
	descSvcInB   = prometheus.NewDesc("ipvsctl_service_incoming_bytes_total", "Bytes to a virtual service.", svcLabels, nil)
	descSvcOutB  = prometheus.NewDesc("ipvsctl_service_outgoing_bytes_total", "Bytes from a virtual service (NAT).", svcLabels, nil)
)

func (t *table) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descKernel, descAge, descRevision, descActive, descInactive, descWeight, descUp, descLastRun,
		descRSConns, descRSInPk, descRSOutPk, descRSInB, descRSOutB, descSvcConns, descSvcInPk, descSvcOutPk, descSvcInB, descSvcOutB} {
		ch <- d
	}
}

func (t *table) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := t.core.Status(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(descKernel, prometheus.GaugeValue, 0)
		return
	}
	avail := 0.0
	if v.Kernel.Available {
		avail = 1
	}
	ch <- prometheus.MustNewConstMetric(descKernel, prometheus.GaugeValue, avail)
	ch <- prometheus.MustNewConstMetric(descAge, prometheus.GaugeValue, v.Kernel.Age)
	ch <- prometheus.MustNewConstMetric(descRevision, prometheus.GaugeValue, float64(v.Revision))
	gauge := func(d *prometheus.Desc, val float64, labels []string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, val, labels...)
	}
	counter := func(d *prometheus.Desc, val uint64, labels []string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(val), labels...)
	}
	for _, s := range v.Services {
		// node_exporter's labels: a fwmark service has an empty address and port 0.
		proto, port, mark := s.Protocol, strconv.Itoa(int(s.Port)), ""
		if s.FWMark != 0 {
			proto, mark = "FWM", fwmarkLabel(s.FWMark)
		} else {
			proto = map[string]string{"tcp": "TCP", "udp": "UDP", "sctp": "SCTP"}[proto]
		}
		sl := []string{s.Address, port, proto, mark}
		counter(descSvcConns, s.Stats.Conns, sl)
		counter(descSvcInPk, s.Stats.InPkts, sl)
		counter(descSvcOutPk, s.Stats.OutPkts, sl)
		counter(descSvcInB, s.Stats.InBytes, sl)
		counter(descSvcOutB, s.Stats.OutBytes, sl)
		for _, d := range s.Servers {
			rl := []string{s.Address, port, d.Address, strconv.Itoa(int(d.Port)), proto, mark}
			if h := d.Health; h == nil || h.Phase != "sorry server" {
				up := 1.0
				if h != nil && h.State != "up" {
					up = 0
				}
				gauge(descUp, up, rl)
			}
			if h := d.Health; h != nil && h.LastCheck != nil {
				gauge(descLastRun, float64(h.LastCheck.UnixNano())/1e9, rl)
			}
			if d.Health != nil && !d.Health.InKernel {
				gauge(descWeight, 0, rl)
				continue // listed for its health; the kernel has no counters for it
			}
			gauge(descActive, float64(d.ActiveConns), rl)
			gauge(descInactive, float64(d.InactiveConns), rl)
			gauge(descWeight, float64(d.Weight), rl)
			counter(descRSConns, d.Stats.Conns, rl)
			counter(descRSInPk, d.Stats.InPkts, rl)
			counter(descRSOutPk, d.Stats.OutPkts, rl)
			counter(descRSInB, d.Stats.InBytes, rl)
			counter(descRSOutB, d.Stats.OutBytes, rl)
		}
	}
}
