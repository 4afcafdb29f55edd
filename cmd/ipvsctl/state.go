package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/client"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// backend is where a verb's calls go: a daemon's API (--server, or the
// local daemon's socket beside the database), else a core in this process
// over the database, which then reconciles the kernel itself under a lock.
type backend struct {
	server.Director
	actor server.Actor
	local *server.Core // nil when the calls go to a daemon
	close func()
}

func (e *cliEnv) backend(ctx context.Context, g *globalFlags) (*backend, error) {
	return e.openBackend(ctx, g, store.Open)
}

// readBackend is backend for the verbs that only read (history, export,
// status, why, diff): without a daemon, it opens the database read-only, so
// that they work on a full or read-only filesystem, in an incident.
// A database not there yet is made, and one an older ipvsctl left is
// upgraded, as a write would (the only case a read writes), so that a
// first status works on a new director and after an upgrade.
func (e *cliEnv) readBackend(ctx context.Context, g *globalFlags) (*backend, error) {
	return e.openBackend(ctx, g, func(ctx context.Context, path string) (*store.Store, error) {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return store.Open(ctx, path)
		}
		st, err := store.OpenReadOnly(ctx, path)
		if errors.Is(err, store.ErrSchemaBehind) {
			st, oerr := store.Open(ctx, path)
			if oerr != nil {
				// On a full or read-only filesystem: say that the read
				// needed the upgrade, not only why the upgrade failed.
				return nil, fmt.Errorf("%w; the read needs that upgrade, a write, which failed: %w", err, oerr)
			}
			return st, nil
		}
		return st, err
	})
}

func (e *cliEnv) openBackend(ctx context.Context, g *globalFlags, open func(context.Context, string) (*store.Store, error)) (*backend, error) {
	actor := server.Actor{Name: e.author(), Via: "cli"}
	if c, ok, err := e.remote(g); err != nil || ok {
		if err != nil {
			return nil, err
		}
		return &backend{Director: c, actor: actor, close: func() {}}, nil
	}
	st, err := open(ctx, g.db)
	if err != nil {
		return nil, err
	}
	for _, n := range st.MigrationNotes() {
		fmt.Fprintln(e.stderr, "ipvsctl: "+n)
	}
	core := e.core(st, g.db)
	return &backend{Director: core, actor: actor, local: core, close: func() { st.Close() }}, nil
}

// core is a core over st for this process.
func (e *cliEnv) core(st *store.Store, db string) *server.Core {
	return server.New(e.coreConfig(st, db))
}

func (e *cliEnv) coreConfig(st *store.Store, db string) server.Config {
	cfg := server.Config{Store: st, LockPath: db + ".lock", Log: e.logger(levelWarn)}
	if e.kernel != nil {
		cfg.OpenKernel = e.fakeKernel
	}
	return cfg
}

func (e *cliEnv) fakeKernel() (*server.KernelConn, error) {
	kc := &server.KernelConn{Kernel: e.kernel, Close: func() {}}
	if e.host != nil {
		kc.Host = e.host
	}
	return kc, nil
}

// author names who makes a change: the user behind sudo, else the user.
func (e *cliEnv) author() string {
	for _, k := range []string{"SUDO_USER", "USER", "LOGNAME"} {
		if v := e.getenv(k); v != "" {
			return v
		}
	}
	// /etc/passwd first: user.Current asks NSS, which loads libraries, a
	// cost every write would pay when run without a login environment.
	uid := strconv.Itoa(os.Getuid())
	if b, err := os.ReadFile("/etc/passwd"); err == nil {
		for line := range strings.Lines(string(b)) {
			if f := strings.SplitN(line, ":", 4); len(f) == 4 && f[2] == uid {
				return f[0]
			}
		}
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "uid " + uid
}

// openDocument opens a desired-state document ("-" is stdin).
func (e *cliEnv) openDocument(path string) (*os.File, error) {
	if path == "-" {
		return os.Stdin, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open state document: %w", err)
	}
	return f, nil
}

// remote gives the daemon's API when the verb is to go to one: --server, or
// the local daemon's socket. ok is false when the verb runs in this process.
func (e *cliEnv) remote(g *globalFlags) (server.Director, bool, error) {
	if g.server != "" {
		c, err := client.NewRemote(g.server, g.token, g.caCert)
		return c, err == nil, err
	}
	if sock := socketPath(g.db); client.Reachable(sock) {
		return client.Local(sock, e.author()), true, nil
	}
	return nil, false, nil
}

// socketPath is where the daemon listens for the CLI: beside the database.
func socketPath(db string) string { return db + ".sock" }
