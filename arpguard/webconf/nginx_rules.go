package webconf

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/tune"
)

// Host is what a rule needs of the real server beside the configuration.
type Host struct {
	CPUs      int   // online CPUs (0: unknown)
	NoFile    int64 // open-files soft limit of a worker process (0: unknown, -1: unlimited)
	Somaxconn int   // net.core.somaxconn (0: unknown)
}

// KindNginxDropIn is a finding's Kind when push --apply writes it: a
// directive of the http block, in a file of its own under a directory the
// http block includes. Every other web-server finding is advice.
const KindNginxDropIn = "nginx-dropin"

// DropInName is the file push writes in an nginx drop-in directory.
const DropInName = "ipvsctl-tune.conf"

const nginxDocs = "https://nginx.org/en/docs/"

func nginxCore(d string) string { return nginxDocs + "ngx_core_module.html#" + d }
func nginxHTTP(d string) string { return nginxDocs + "http/ngx_http_core_module.html#" + d }
func nginxLog(d string) string  { return nginxDocs + "http/ngx_http_log_module.html#" + d }

// NginxDropIn is the file a drop-in would be written to: in the first
// directory the http block includes by a pattern DropInName matches ("":
// none, so nothing is written).
func NginxDropIn(ds []*Directive) string {
	http := Find(ds, "http")
	if http == nil {
		return ""
	}
	for _, d := range http.Block {
		if d.Name != "include" || len(d.Args) != 1 || !strings.ContainsAny(d.Args[0], "*?[") {
			continue
		}
		pat := d.Args[0]
		if !path.IsAbs(pat) {
			pat = path.Join(path.Dir(d.File), pat)
		}
		dir, base := path.Split(pat)
		if strings.ContainsAny(dir, "*?[") {
			continue
		}
		if ok, _ := path.Match(base, DropInName); ok {
			return path.Join(dir, DropInName)
		}
	}
	return ""
}

// NginxFindings holds nginx's configuration (ParseNginx's directives,
// from the main file main) against nginx.org's manual.
func NginxFindings(ds []*Directive, main string, h Host) []tune.Finding {
	c := &nginxCheck{ds: ds, main: main, h: h, eventsAt: main, httpAt: main, dropIn: NginxDropIn(ds)}
	if events := Find(ds, "events"); events != nil {
		c.eventsBlock, c.eventsAt = events.Block, events.Where()
	}
	if c.http = Find(ds, "http"); c.http != nil {
		c.httpBlock, c.httpAt = c.http.Block, c.http.Where()
	}
	workers := c.workers()
	c.connections(workers)
	nginxListens(c.httpBlock, workers, h, c.add)
	c.keepaliveRequests()
	c.accessLogs()
	if c.http != nil {
		c.httpDirectives()
	}
	return c.out
}

// nginxCheck is one configuration being held against the rules: its
// blocks, where a directive that is unset would go, and the findings.
type nginxCheck struct {
	ds                     []*Directive
	main                   string
	h                      Host
	http                   *Directive
	eventsBlock, httpBlock []*Directive
	eventsAt, httpAt       string
	dropIn                 string
	out                    []tune.Finding
}

func (c *nginxCheck) add(f tune.Finding) { c.out = append(c.out, finding("nginx", f)) }

// finding is f as one of server's (nginx, haproxy): its setting named with
// the server, ok and a manual change unless it says otherwise.
func finding(server string, f tune.Finding) tune.Finding {
	f.Setting = server + " " + f.Setting
	if f.Status == "" {
		f.Status = tune.OK
	}
	if f.Kind == "" {
		f.Kind = tune.KindManual
	}
	return f
}

// where is d's file:line, or fallback for a directive that is unset.
func (c *nginxCheck) where(d *Directive, fallback string) string {
	if d != nil {
		return d.Where()
	}
	return fallback
}

// workers: worker_processes against the CPUs; it returns how many run.
func (c *nginxCheck) workers() int {
	workers := 1
	wp := Find(c.ds, "worker_processes")
	f := tune.Finding{Setting: "worker_processes", Current: "1 (default)", Source: nginxCore("worker_processes"), Where: c.where(wp, c.main),
		Recommended: "auto (one per CPU)",
		Why:         "one worker process uses one CPU at a time: the manual's starting point is the number of CPU cores, which auto detects"}
	if wp != nil && len(wp.Args) == 1 {
		f.Current = wp.Args[0]
		if wp.Args[0] == "auto" {
			workers = max(c.h.CPUs, 1)
		} else if n, err := strconv.Atoi(wp.Args[0]); err == nil {
			workers = n
		}
	}
	if f.Current != "auto" && c.h.CPUs > 0 {
		f.Recommended = fmt.Sprintf("auto (%d CPUs here)", c.h.CPUs)
		switch {
		case workers < c.h.CPUs:
			f.Status = tune.Change
			f.Why = fmt.Sprintf("%d worker(s) on %d CPUs: the other CPUs take no connections; %s", workers, c.h.CPUs, f.Why)
		case workers > c.h.CPUs:
			f.Status = tune.Change
			f.Why = fmt.Sprintf("%d workers on %d CPUs contend for them; %s", workers, c.h.CPUs, f.Why)
		}
	}
	c.add(f)
	return workers
}

// connections: worker_connections, and the open-files limit against it.
func (c *nginxCheck) connections(workers int) {
	wcD := Find(c.eventsBlock, "worker_connections")
	wc := 512
	if wcD != nil && len(wcD.Args) == 1 {
		if n, err := strconv.Atoi(wcD.Args[0]); err == nil {
			wc = n
		}
	}
	f := tune.Finding{Setting: "worker_connections", Current: strconv.Itoa(wc), Source: nginxCore("worker_connections"),
		Where: c.where(wcD, c.eventsAt), Recommended: "4096 or more",
		Why: fmt.Sprintf("the most connections a worker holds, clients and upstreams together: %d workers take at most %d at once, the rest wait in the accept queue", workers, workers*wc)}
	if wcD == nil {
		f.Current += " (default)"
	}
	if wc < 4096 {
		f.Status = tune.Change
	}
	c.add(f)

	rl := Find(c.ds, "worker_rlimit_nofile")
	limit, limitFrom := c.h.NoFile, "the worker's open-files limit (/proc/PID/limits)"
	if rl != nil && len(rl.Args) == 1 {
		if n, err := strconv.ParseInt(rl.Args[0], 10, 64); err == nil {
			limit, limitFrom = n, "worker_rlimit_nofile"
		}
	}
	f = tune.Finding{Setting: "worker_rlimit_nofile", Source: nginxCore("worker_rlimit_nofile") + " ; " + nginxCore("worker_connections"),
		Where: c.where(rl, c.main), Recommended: fmt.Sprintf("%d or more (2 x worker_connections)", 2*wc),
		Why: "a connection is a file descriptor, and a proxied one two: the manual notes the connections cannot exceed the open-files limit, which worker_rlimit_nofile raises without restarting the service"}
	switch {
	case limit == 0:
		f.Current, f.Status = "unknown", tune.Info
	case limit < 0:
		f.Current = "unlimited"
	default:
		f.Current = fmt.Sprintf("%d (%s)", limit, limitFrom)
		if limit < int64(wc) {
			f.Status = tune.Far
			f.Why = fmt.Sprintf("worker_connections %d is above the open-files limit %d: accept() fails with EMFILE first (nginx logs 'worker_connections exceed open file resource limit'); %s", wc, limit, f.Why)
		} else if limit < 2*int64(wc) {
			f.Status = tune.Change
		}
	}
	c.add(f)

	ma := Find(c.eventsBlock, "multi_accept")
	f = tune.Finding{Setting: "multi_accept", Current: "off (default)", Recommended: "on", Source: nginxCore("multi_accept"),
		Where: c.where(ma, c.eventsAt),
		Why:   "off: a worker accepts one new connection per wake-up; on: all that are waiting, which keeps the accept queue short when the director sends bursts"}
	if ma != nil && len(ma.Args) == 1 {
		f.Current = ma.Args[0]
	}
	if f.Current != "on" {
		f.Status = tune.Change
	}
	c.add(f)
}

// keepaliveRequests wherever it is set, or its default.
func (c *nginxCheck) keepaliveRequests() {
	kr := false
	Walk(c.httpBlock, func(d *Directive, in []string) {
		if d.Name != "keepalive_requests" || len(d.Args) != 1 {
			return
		}
		kr = true
		name := "keepalive_requests"
		if len(in) > 0 {
			name += " at " + d.Where() // a server's or location's own
		}
		f := tune.Finding{Setting: name, Current: d.Args[0], Recommended: "1000 or more", Source: nginxHTTP("keepalive_requests"),
			Where: d.Where(), Why: "requests served on one client connection before nginx closes it: a low figure makes clients reconnect through the director (a new IPVS entry, a TIME_WAIT here) every few requests"}
		if n, err := strconv.Atoi(d.Args[0]); err != nil || n < 1000 {
			f.Status = tune.Change
		}
		c.add(f)
	})
	if !kr && c.http != nil {
		c.add(tune.Finding{Setting: "keepalive_requests", Current: "1000 (default)", Recommended: "1000 or more", Source: nginxHTTP("keepalive_requests"),
			Where: c.httpAt, Why: "requests served on one client connection before nginx closes it"})
	}
}

// accessLogs: each log written unbuffered is a write(2) per request.
func (c *nginxCheck) accessLogs() {
	logs := 0
	Walk(c.httpBlock, func(d *Directive, _ []string) {
		if d.Name != "access_log" || len(d.Args) == 0 {
			return
		}
		logs++
		f := tune.Finding{Setting: "access_log " + d.Args[0], Current: strings.Join(d.Args, " "), Source: nginxLog("access_log"), Where: d.Where(),
			Recommended: "buffer=64k flush=1s (or off)",
			Why:         "without buffer= every request is a write(2) to the log file from the worker that served it"}
		if d.Args[0] == "off" || strings.HasPrefix(d.Args[0], "syslog:") || hasParam(d.Args[1:], "buffer=") {
			f.Recommended = f.Current
		} else {
			f.Status = tune.Change
		}
		c.add(f)
	})
	if logs == 0 && c.http != nil {
		c.add(tune.Finding{Setting: "access_log", Current: "logs/access.log combined (default)", Source: nginxLog("access_log"), Where: c.httpAt,
			Recommended: "buffer=64k flush=1s (or off)", Status: tune.Change,
			Why: "the default log is written unbuffered: a write(2) per request"})
	}
}

// httpDirectives: the http block's own open_file_cache, sendfile and
// tcp_nopush, which a drop-in may set when they are unset.
func (c *nginxCheck) httpDirectives() {
	ofc := Find(c.httpBlock, "open_file_cache")
	f := tune.Finding{Setting: "open_file_cache", Current: "off (default)", Recommended: "max=10000 inactive=30s", Source: nginxHTTP("open_file_cache"),
		Where: c.where(ofc, c.httpAt),
		Why:   "keeps open descriptors and sizes of the files served, sparing an open(2) and stat(2) per request for static content"}
	if ofc != nil {
		f.Current = strings.Join(ofc.Args, " ")
	}
	if f.Current == "off" || ofc == nil {
		f.Status = tune.Change
	}
	if ofc == nil && c.dropIn != "" {
		f.Kind, f.Value = KindNginxDropIn, "open_file_cache max=10000 inactive=30s;"
	}
	c.add(f)

	sf := Find(c.httpBlock, "sendfile")
	sendfile := sf != nil && len(sf.Args) == 1 && sf.Args[0] == "on"
	f = tune.Finding{Setting: "sendfile", Current: "off (default)", Recommended: "on", Source: nginxHTTP("sendfile"), Where: c.where(sf, c.httpAt),
		Why: "on: the kernel copies a file to the socket itself (sendfile(2)) instead of read(2) then write(2) through the worker"}
	if sf != nil {
		f.Current = strings.Join(sf.Args, " ")
	}
	if !sendfile {
		f.Status = tune.Change
		if sf == nil && c.dropIn != "" {
			f.Kind, f.Value = KindNginxDropIn, "sendfile on;"
		}
	}
	c.add(f)

	np := Find(c.httpBlock, "tcp_nopush")
	f = tune.Finding{Setting: "tcp_nopush", Current: "off (default)", Recommended: "on (with sendfile)", Source: nginxHTTP("tcp_nopush"), Where: c.where(np, c.httpAt),
		Why: "with sendfile, TCP_CORK sends the response header and the start of the file in full packets instead of a short one first"}
	if np != nil {
		f.Current = strings.Join(np.Args, " ")
	}
	if f.Current != "on" {
		f.Status = tune.Change
		if np == nil && c.dropIn != "" {
			f.Kind, f.Value = KindNginxDropIn, "tcp_nopush on;"
		}
	}
	c.add(f)
}

// nginxListens: each address the http servers listen on, its backlog
// against somaxconn and whether the workers share one socket or have one
// each (reuseport), in the order first written.
func nginxListens(httpBlock []*Directive, workers int, h Host, add func(tune.Finding)) {
	type addr struct {
		first     *Directive
		backlog   int
		reuseport bool
	}
	byAddr := map[string]*addr{}
	var order []string
	for _, srv := range httpBlock {
		if srv.Name != "server" {
			continue
		}
		for _, d := range srv.Block {
			if d.Name != "listen" || len(d.Args) == 0 {
				continue
			}
			a := byAddr[d.Args[0]]
			if a == nil {
				a = &addr{first: d, backlog: 511}
				byAddr[d.Args[0]] = a
				order = append(order, d.Args[0])
			}
			for _, p := range d.Args[1:] {
				if v, ok := strings.CutPrefix(p, "backlog="); ok {
					if n, err := strconv.Atoi(v); err == nil {
						a.backlog = n
					}
				}
				if p == "reuseport" {
					a.reuseport = true
				}
			}
		}
	}
	for _, k := range order {
		a := byAddr[k]
		f := tune.Finding{Setting: "listen " + k + " backlog", Current: strconv.Itoa(a.backlog), Recommended: "backlog=4096 (and net.core.somaxconn at least that)",
			Source: nginxHTTP("listen"), Where: a.first.Where(),
			Why: "the accept queue of the socket: connections the director sends while every worker is busy wait there; nginx asks listen() for 511 unless told"}
		switch {
		case h.Somaxconn > 0 && a.backlog > h.Somaxconn:
			f.Status = tune.Change
			f.Why = fmt.Sprintf("backlog=%d is capped by net.core.somaxconn %d: raise somaxconn (realserver tune push does); %s", a.backlog, h.Somaxconn, f.Why)
		case a.backlog < 4096:
			f.Status = tune.Change
		}
		add(f)
		f = tune.Finding{Setting: "listen " + k + " reuseport", Current: "off", Recommended: "reuseport", Source: nginxHTTP("listen"), Where: a.first.Where(),
			Why: "one listening socket per worker (SO_REUSEPORT): the kernel spreads new connections over the workers instead of waking them all on one queue (set on one listen of the address)"}
		if a.reuseport {
			f.Current = "reuseport"
		} else if workers > 1 {
			f.Status = tune.Change
		} else {
			f.Status = tune.Info
			f.Why = "one worker: nothing to spread; " + f.Why
		}
		add(f)
	}
}

func hasParam(args []string, prefix string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, prefix) {
			return true
		}
	}
	return false
}
