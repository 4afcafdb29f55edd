package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/client"
	"github.com/ipvsctl/ipvsctl/server/daemon"
	"github.com/ipvsctl/ipvsctl/server/events"
	"github.com/ipvsctl/ipvsctl/server/httpd"
	"github.com/ipvsctl/ipvsctl/server/metrics"
	"github.com/ipvsctl/ipvsctl/server/redundancy"
	"github.com/ipvsctl/ipvsctl/server/store"
)

type serveFlags struct {
	interval                     time.Duration
	listen, metricsListen        string
	tlsCert, tlsKey              string
	tlsSelfSigned, plainHTTP     bool
	retainDays, retainMB         int
	trustedProxies, trustedOrigs string
	ssh                          serveSSHFlags
	proxies                      []netip.Prefix          // trustedProxies, parsed
	killAt                       redundancy.TakeoverStep // the fault matrix's (env IPVSCTL_FAULT_KILL_AT): serve_faults.go
	identityKey                  string                  // the key of cfg.IdentityCert, shown to the peers as a client certificate
	fs                           *flag.FlagSet
}

// runServe parses the flags, builds the daemon and its servers, and runs
// them until SIGTERM or SIGINT.
func runServe(env *cliEnv, args []string) int {
	f, g, code, ok := parseServeFlags(env, args)
	if !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := env.logger(slog.LevelInfo)
	rsSSH, err := f.ssh.config(f.fs, log)
	if err != nil {
		return env.fail("serve", err, true)
	}
	st, err := store.Open(ctx, g.db)
	if err != nil {
		return env.fail("serve", err, false)
	}
	defer st.Close()
	for _, n := range st.MigrationNotes() {
		log.Warn("state database", "migration", n)
	}
	if err := st.Check(ctx); err != nil {
		return env.fail("serve", err, false)
	}
	unlock, err := server.LockKernel(ctx, g.db+".lock")
	if err != nil {
		return env.fail("serve", err, false)
	}
	defer unlock()
	// This director's identity, made on first start: what its peer pins.
	idCert, idKey, err := httpd.SelfSigned(filepath.Dir(g.db))
	if err != nil {
		return env.fail("serve", fmt.Errorf("this director's certificate: %w", err), false)
	}
	if f.tlsSelfSigned {
		f.tlsCert, f.tlsKey = idCert, idKey
	}
	if f.tlsKey != "" {
		if err := httpd.RestrictKey(f.tlsKey); err != nil {
			log.Warn("the TLS key is readable by others than its owner", "key", f.tlsKey, "err", err)
		}
	}
	cfg := env.coreConfig(st, g.db)
	cfg.RealServerSSH = rsSSH
	cfg.IdentityCert = orDefault(f.tlsCert, idCert)
	f.identityKey = orDefault(f.tlsKey, idKey)
	p, err := newServeParts(ctx, cfg, st, f, log)
	if err != nil {
		return env.fail("serve", err, false)
	}
	if err := p.side.RecordIdentity(ctx); err != nil {
		return env.fail("serve", err, false)
	}
	srv, tlsOn, usage, err := p.listen(f, g.db, idCert, idKey, log)
	if err != nil {
		return env.fail("serve", err, usage)
	}
	if first, err := p.auth.NeedsFirstUser(ctx); err == nil && first {
		log.Warn(strings.ReplaceAll(auth.FirstAdminHint, "\n", " "))
	}
	log.Info("ipvsctl serving", "db", g.db, "interval", f.interval.String())
	if err := p.run(ctx, srv, f, tlsOn); err != nil {
		return env.fail("serve", err, false)
	}
	log.Info("ipvsctl stopped")
	return exitOK
}

// parseServeFlags reads serve's flags; ok is false when the verb must stop
// with code (a usage error, or --help).
func parseServeFlags(env *cliEnv, args []string) (f *serveFlags, g *globalFlags, code int, ok bool) {
	fs, g := env.newFlagSet("serve", "[--listen :3636] [--tls-cert FILE --tls-key FILE | --tls-self-signed | --plain-http] [--interval 10s] [--ssh-identity FILE]",
		"The daemon: restore (modules, sysctls, VIPs, services), then keep the kernel matching the stored\n"+
			"desired state: at once after each change, and every --interval anyway, which repairs out-of-band\n"+
			"changes and finishes drains. Serves the panel, the JSON API (/api/v1) and /metrics on --listen, and\n"+
			"the same API to the local CLI on a socket beside the database. Stops on SIGTERM or SIGINT, letting\n"+
			"requests in flight finish. Where the kernel has no IPVS it still serves and stores the desired state.\n"+
			"With an SSH identity (--ssh-*, as realserver verify's flags) the panel and the API verify real servers.\n"+
			"On any address but loopback it serves TLS: --tls-cert, else this director's own self-signed certificate\n"+
			"(made on first start beside the database, its addresses in the SAN; node show prints its fingerprint);\n"+
			"plain HTTP there only with --plain-http.")
	f = &serveFlags{fs: fs}
	fs.DurationVar(&f.interval, "interval", 10*time.Second, "full reconcile period")
	fs.StringVar(&f.listen, "listen", ":3636", "address of the panel and API (\"\" for none)")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "serve /metrics without auth on its own address (node_exporter's way)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate file (PEM)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "TLS key file (PEM)")
	fs.BoolVar(&f.tlsSelfSigned, "tls-self-signed", false, "serve TLS with this director's self-signed certificate even on loopback (the default elsewhere)")
	fs.BoolVar(&f.plainHTTP, "plain-http", false, "serve plain HTTP on a non-loopback --listen (passwords and tokens cross the network in clear)")
	fs.IntVar(&f.retainDays, "retain-days", 90, "keep audit rows, health transitions and events this many days (0: no age limit)")
	fs.IntVar(&f.retainMB, "retain-mb", 1024, "and while the database uses more than this many MB, drop the oldest first (0: no size limit)")
	fs.StringVar(&f.trustedProxies, "trusted-proxy", "", "comma-separated CIDRs of reverse proxies whose X-Forwarded-For is believed")
	fs.StringVar(&f.trustedOrigs, "trusted-origin", "", "comma-separated origins (https://name) allowed to post besides the panel's own")
	f.ssh.register(fs, homeDir(env))
	if st, ok := env.parseFlags(fs, args); !ok {
		return nil, nil, st, false
	}
	if fs.NArg() > 0 || f.interval < 100*time.Millisecond {
		fmt.Fprintln(env.stderr, "ipvsctl serve: takes no arguments; --interval must be at least 100ms")
		return nil, nil, exitUsage, false
	}
	if f.retainDays < 0 || f.retainMB < 0 {
		fmt.Fprintf(env.stderr, "ipvsctl serve: retain-days %d, retain-mb %d: want 0 or more\n", f.retainDays, f.retainMB)
		return nil, nil, exitUsage, false
	}
	if (f.tlsCert == "") != (f.tlsKey == "") || (f.tlsSelfSigned && f.tlsCert != "") || (f.plainHTTP && (f.tlsSelfSigned || f.tlsCert != "")) {
		fmt.Fprintln(env.stderr, "ipvsctl serve: give --tls-cert with --tls-key, or --tls-self-signed, or --plain-http")
		return nil, nil, exitUsage, false
	}
	if f.killAt, ok = faultKillAt(env); !ok {
		return nil, nil, exitUsage, false
	}
	for _, s := range splitList(f.trustedProxies) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			fmt.Fprintf(env.stderr, "ipvsctl serve: trusted-proxy: %q is not a CIDR prefix\n", s)
			return nil, nil, exitUsage, false
		}
		f.proxies = append(f.proxies, p)
	}
	return f, g, 0, true
}

// serveParts is what serve runs: the core with its daemon, and the HTTP
// side (auth, metrics, the panel, the options of the handlers).
type serveParts struct {
	core    *server.Core
	side    *server.DaemonSide // the core's hooks this process alone uses
	daemon  *daemon.Daemon
	auth    *auth.Auth
	metrics *metrics.Metrics
	panel   interface{ RunSampler(context.Context) }
	opts    httpd.Options
}

func newServeParts(ctx context.Context, cfg server.Config, st *store.Store, f *serveFlags, log *slog.Logger) (*serveParts, error) {
	evs, err := events.New(ctx, st, log)
	if err != nil {
		return nil, err
	}
	cfg.Events = evs
	p := &serveParts{auth: auth.New(st, auth.Config{TrustedProxies: f.proxies, Log: log, OnLockout: server.LockoutEvent(evs)})}
	cfg.Auth = p.auth // the API's user and token writes share the logins' hashing limits
	p.core = server.New(cfg)
	p.side = server.DaemonSideOf(p.core)
	p.daemon = daemon.New(p.core, st, log)
	p.daemon.Interval = f.interval
	// systemd's socket is the daemon's alone: the programs it runs
	// (notify, quorum) must not tell systemd anything.
	p.daemon.NotifySocket = os.Getenv("NOTIFY_SOCKET")
	os.Unsetenv("NOTIFY_SOCKET")
	// Another director is reached with this one's certificate as the client's.
	dial := func(d server.PeerDial) (*client.Client, error) {
		own, err := client.LoadIdentity(cfg.IdentityCert, f.identityKey)
		if err != nil {
			return nil, err
		}
		return client.NewPeer(d, own)
	}
	redundancy.Attach(p.daemon, redundancy.Hooks{Peer: func(d server.PeerDial) (server.Peer, error) { return dial(d) },
		AtStep: killAtStep(f.killAt, log)})
	p.daemon.Directors = func(d server.PeerDial) (daemon.DirectorPeer, error) { return dial(d) }
	context.AfterFunc(ctx, p.side.EndLongPolls) // a peer's long poll must not hold up the shutdown
	p.metrics = metrics.New(p.core)
	p.daemon.Observe(p.metrics)
	p.opts = httpd.Options{Core: p.core, Auth: p.auth, Log: log, TrustedOrigins: splitList(f.trustedOrigs), Instrument: p.metrics.Instrument}
	if f.metricsListen == "" {
		p.opts.Metrics = p.metrics.Handler()
	}
	pnl, err := httpd.NewPanel(p.core, p.auth, time.Now(), p.opts)
	if err != nil {
		return nil, err
	}
	p.panel = pnl
	p.opts.Panel = pnl
	return p, nil
}

// listen opens serve's listeners: the panel and API on --listen (TLS or
// not), the local CLI's socket beside the database, and --metrics-listen.
// tlsOn says, per listener, whether it serves TLS; usage, whether an error
// is the flags'.
func (p *serveParts) listen(f *serveFlags, db, idCert, idKey string, log *slog.Logger) (srv *httpd.Server, tlsOn []bool, usage bool, err error) {
	srv = &httpd.Server{}
	if f.listen != "" {
		h, err := httpd.Handler(p.opts)
		if err != nil {
			return nil, nil, true, err
		}
		ln, err := net.Listen("tcp", f.listen)
		if err != nil {
			return nil, nil, false, err
		}
		if f.tlsCert == "" && !f.plainHTTP && !isLoopback(ln.Addr()) {
			f.tlsCert, f.tlsKey = idCert, idKey
		}
		if f.tlsCert != "" {
			h = httpd.HSTS(h)
		}
		srv.Add(ln, h, log)
		tlsOn = append(tlsOn, f.tlsCert != "")
		if f.tlsCert == "" && !isLoopback(ln.Addr()) {
			log.Warn("serving the panel and API over plain HTTP on a non-loopback address (--plain-http): passwords and tokens cross the network in clear", "listen", ln.Addr().String())
		}
		log.Info("panel and API listening", "addr", ln.Addr().String(), "tls", f.tlsCert != "")
	}
	sock, err := httpd.ListenUnix(socketPath(db))
	if err != nil {
		return nil, nil, false, err
	}
	srv.Add(sock, httpd.LocalHandler(p.opts), log)
	tlsOn = append(tlsOn, false)
	if f.metricsListen != "" {
		ln, err := net.Listen("tcp", f.metricsListen)
		if err != nil {
			return nil, nil, false, err
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", p.metrics.Handler())
		srv.Add(ln, mux, log)
		tlsOn = append(tlsOn, false)
	}
	return srv, tlsOn, false, nil
}

// run serves until ctx ends. The daemon stops after the listeners: a write
// in flight at SIGTERM finishes, reconcile included, before the kernel is
// let go.
func (p *serveParts) run(ctx context.Context, srv *httpd.Server, f *serveFlags, tlsOn []bool) error {
	daemonCtx, stopDaemon := context.WithCancel(context.WithoutCancel(ctx))
	daemonDone := make(chan error, 1)
	go func() { daemonDone <- p.daemon.Run(daemonCtx) }()
	go p.panel.RunSampler(daemonCtx)
	go p.side.RunRetention(daemonCtx, server.Retention{MaxAge: time.Duration(f.retainDays) * 24 * time.Hour,
		MaxBytes: int64(f.retainMB) << 20}, time.Hour)
	err := srv.Run(ctx, f.tlsCert, f.tlsKey, tlsOn)
	stopDaemon()
	if derr := <-daemonDone; err == nil {
		err = derr
	}
	return err
}

func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}
