package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/client"
	"github.com/ipvsctl/ipvsctl/server/httpd"
	"github.com/ipvsctl/ipvsctl/server/metrics"
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
}

func runServe(env *cliEnv, args []string) int {
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
	var f serveFlags
	fs.DurationVar(&f.interval, "interval", 10*time.Second, "full reconcile period")
	fs.StringVar(&f.listen, "listen", ":3636", "address of the panel and API (\"\" for none)")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "serve /metrics without auth on its own address (node_exporter's way)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate file (PEM)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "TLS key file (PEM)")
	fs.BoolVar(&f.tlsSelfSigned, "tls-self-signed", false, "serve TLS with this director's self-signed certificate even on loopback (the default elsewhere)")
	fs.BoolVar(&f.plainHTTP, "plain-http", false, "serve plain HTTP on a non-loopback --listen (passwords and tokens cross the network in clear)")
	fs.IntVar(&f.retainDays, "retain-days", 90, "keep audit rows and health transitions this many days (0: no age limit)")
	fs.IntVar(&f.retainMB, "retain-mb", 1024, "and while the database uses more than this many MB, drop the oldest first (0: no size limit)")
	fs.StringVar(&f.trustedProxies, "trusted-proxy", "", "comma-separated CIDRs of reverse proxies whose X-Forwarded-For is believed")
	fs.StringVar(&f.trustedOrigs, "trusted-origin", "", "comma-separated origins (https://name) allowed to post besides the panel's own")
	f.ssh.register(fs, homeDir(env))
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 || f.interval < 100*time.Millisecond {
		fmt.Fprintln(env.stderr, "ipvsctl serve: takes no arguments; --interval must be at least 100ms")
		return exitUsage
	}
	if f.retainDays < 0 || f.retainMB < 0 {
		fmt.Fprintf(env.stderr, "ipvsctl serve: retain-days %d, retain-mb %d: want 0 or more\n", f.retainDays, f.retainMB)
		return exitUsage
	}
	if (f.tlsCert == "") != (f.tlsKey == "") || (f.tlsSelfSigned && f.tlsCert != "") || (f.plainHTTP && (f.tlsSelfSigned || f.tlsCert != "")) {
		fmt.Fprintln(env.stderr, "ipvsctl serve: give --tls-cert with --tls-key, or --tls-self-signed, or --plain-http")
		return exitUsage
	}
	var proxies []netip.Prefix
	for _, s := range splitList(f.trustedProxies) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			fmt.Fprintf(env.stderr, "ipvsctl serve: trusted-proxy: %q is not a CIDR prefix\n", s)
			return exitUsage
		}
		proxies = append(proxies, p)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := env.logger(slog.LevelInfo)
	rsSSH, err := f.ssh.config(fs, log)
	if err != nil {
		return env.fail("serve", err, true)
	}
	st, err := store.Open(ctx, g.db)
	if err != nil {
		return env.fail("serve", err, false)
	}
	defer st.Close()
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
	core := server.New(cfg)
	d := server.NewDaemon(core, log)
	d.Interval = f.interval
	d.Hooks.Peer = func(url, token, fp string) (server.Peer, error) { return client.NewPeer(url, token, fp) }
	context.AfterFunc(ctx, core.EndLongPolls) // a peer's long poll must not hold up the shutdown
	a := auth.New(st, auth.Config{TrustedProxies: proxies, Log: log})
	m := metrics.New(core)
	d.OnReconcile(m.Reconciled)
	d.OnHealthEvent(m.HealthEvent)
	d.OnCheck(m.Checked)
	opts := httpd.Options{Core: core, Auth: a, Log: log, TrustedOrigins: splitList(f.trustedOrigs), Instrument: m.Instrument}
	if f.metricsListen == "" {
		opts.Metrics = m.Handler()
	}
	pnl, err := httpd.NewPanel(core, a, time.Now(), opts)
	if err != nil {
		return env.fail("serve", err, false)
	}
	opts.Panel = pnl.Routes()
	var srv httpd.Server
	var tlsOn []bool
	if f.listen != "" {
		h, err := httpd.Handler(opts)
		if err != nil {
			return env.fail("serve", err, true)
		}
		ln, err := net.Listen("tcp", f.listen)
		if err != nil {
			return env.fail("serve", err, false)
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
	sock, err := httpd.ListenUnix(socketPath(g.db))
	if err != nil {
		return env.fail("serve", err, false)
	}
	srv.Add(sock, httpd.LocalHandler(opts), log)
	tlsOn = append(tlsOn, false)
	if f.metricsListen != "" {
		ln, err := net.Listen("tcp", f.metricsListen)
		if err != nil {
			return env.fail("serve", err, false)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", m.Handler())
		srv.Add(ln, mux, log)
		tlsOn = append(tlsOn, false)
	}
	if first, err := a.NeedsFirstUser(ctx); err == nil && first {
		log.Warn(strings.ReplaceAll(auth.FirstAdminHint, "\n", " "))
	}
	log.Info("ipvsctl serving", "db", g.db, "interval", f.interval.String())
	// The daemon stops after the listeners: a write in flight at SIGTERM
	// finishes, reconcile included, before the kernel is let go.
	daemonCtx, stopDaemon := context.WithCancel(context.WithoutCancel(ctx))
	daemonDone := make(chan error, 1)
	go func() { daemonDone <- d.Run(daemonCtx) }()
	go pnl.RunSampler(daemonCtx)
	go core.RunRetention(daemonCtx, store.Retention{MaxAge: time.Duration(f.retainDays) * 24 * time.Hour,
		MaxBytes: int64(f.retainMB) << 20}, time.Hour)
	err = srv.Run(ctx, f.tlsCert, f.tlsKey, tlsOn)
	stopDaemon()
	if derr := <-daemonDone; err == nil {
		err = derr
	}
	if err != nil {
		return env.fail("serve", err, false)
	}
	log.Info("ipvsctl stopped")
	return exitOK
}

func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}
