package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/internal/regularfile"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/httpd"
	"github.com/ipvsctl/ipvsctl/server/trust"
)

const nodeUsage = "usage: ipvsctl node set [--priority N] [--role auto|master|backup] [--replication pair|source|follower] [--peer-url URL --peer-token T|--peer-token-file FILE --peer-fingerprint FP] [--peer-ca FILE] [--follower-fingerprint FP,...] [--allow-replicated-exec] [--address IP] [--router-id IP] [--bgp-source IP]\n" +
	"       ipvsctl node show [--json]\n" +
	"       ipvsctl node drain [--no-wait] [--wait-max D] | undrain\n" +
	"\nThis director's own part in a redundant pair or a group of N, kept outside the replicated revisions:\n" +
	"its VRRP priority, a forced role, the peer or source it replicates the desired state from (or, on a\n" +
	"source, the followers it lets in), whom it believes on that link (pins, a pair CA), and its own address.\n" +
	"Run 'ipvsctl node VERB --help' for a verb's flags."

func runNode(env *cliEnv, args []string) int {
	verb, rest, code, ok := env.subVerb(nodeUsage, args)
	if !ok {
		return code
	}
	switch verb {
	case "set":
		return nodeSet(env, rest)
	case "show":
		return nodeShow(env, rest)
	case "drain", "undrain":
		return nodeDrain(env, verb, rest)
	}
	return env.unknownSubVerb("node", verb)
}

func nodeSet(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("node set", "[--priority N] [--role auto|master|backup] [--replication pair|source|follower] [--peer-url URL --peer-token T|--peer-token-file FILE --peer-fingerprint FP] [--peer-ca FILE] [--follower-fingerprint FP,...] [--allow-replicated-exec] [--address IP] [--router-id IP] [--bgp-source IP]",
		"Change this director's node settings; only the flags given change. A running daemon takes them up\n"+
			"at once: a new priority goes into the running VRRP instance (its next advert; no restart), a new\n"+
			"role restarts it (a master resigns first).")
	f := addNodeSetFlags(fs)
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "ipvsctl node set: takes no arguments")
		return exitUsage
	}
	p, err := f.patch(fs)
	if err != nil {
		return env.fail("node set", err, true)
	}
	if p == (server.NodePatch{}) {
		fmt.Fprintln(env.stderr, "ipvsctl node set: give at least one of --priority, --role, --replication, --peer-url, --peer-token, --peer-fingerprint, --peer-ca, --follower-fingerprint, --allow-replicated-exec, --address, --router-id, --bgp-source")
		return exitUsage
	}
	ctx := context.Background()
	b, err := env.backend(ctx, g)
	if err != nil {
		return env.fail("node set", err, false)
	}
	defer b.close()
	v, err := b.SetNode(ctx, b.actor, p)
	if err != nil {
		return env.fail("node set", err, false)
	}
	printNode(env.stdout, v)
	return exitOK
}

// nodeSetFlags are node set's flags, one per field of server.NodePatch.
type nodeSetFlags struct {
	priority                                                                                         *int
	role, peerURL, peerToken, address, peerFP, replication, peerCA, followerFPs, routerID, bgpSource *string
	allowExec                                                                                        *bool
}

func addNodeSetFlags(fs *flag.FlagSet) *nodeSetFlags {
	f := &nodeSetFlags{}
	f.priority = fs.Int("priority", 0, "VRRP priority 1..255 (default 100; 255 is the address owner)")
	f.role = fs.String("role", "", "auto (VRRP elects), master (priority 255) or backup (never carries the VIPs)")
	f.peerURL = fs.String("peer-url", "", "the other director's API (https://198.18.0.2:3636), or the source's on a follower, which the desired state is replicated from (\"\" for none)")
	f.peerToken = fs.String("peer-token", "", "an API token (viewer at least) of the other director (--peer-token-file keeps it out of the process list)")
	fs.Func("peer-token-file", "a file holding --peer-token (mode 0600, read once, its line end dropped): unlike --peer-token, not shown to every local user in /proc/PID/cmdline", func(path string) error {
		tok, err := regularfile.ReadSecret(path)
		*f.peerToken = tok
		return err
	})
	f.address = fs.String("address", "", "this director's own address among settings.redundancy.unicast_peers (\"\": found from its interfaces)")
	f.peerFP = fs.String("peer-fingerprint", "", "the SHA-256 fingerprint of the peer's (or the source's) certificate (its node show prints it): an https:// peer is believed on it or the pair CA, both ways, never on system roots")
	f.replication = fs.String("replication", "", "pair (the two directors of a VRRP pair follow each other), source (edits are made here; followers take them) or follower (takes the source's at --peer-url, refuses local edits)")
	f.peerCA = fs.String("peer-ca", "", "a pair CA (PEM file) whose certificates are believed, for the address they are used from, besides the pins (\"\" to remove it)")
	f.followerFPs = fs.String("follower-fingerprint", "", "comma-separated SHA-256 fingerprints of the directors allowed to follow this one (their node show prints them; \"\" for none)")
	f.allowExec = fs.Bool("allow-replicated-exec", false, "take exec checks (programs run as root here) from the peer's replicated state (default off: refused)")
	f.routerID = fs.String("router-id", "", "BGP router ID, an IPv4 address (\"\": --bgp-source, --address or the first global IPv4 address)")
	f.bgpSource = fs.String("bgp-source", "", "the address BGP sessions are opened from, the routes' next hop (\"\": the kernel's choice)")
	return f
}

// patch is the change the flags given on fs ask for; --peer-ca names a
// file whose PEM goes into the patch.
func (f *nodeSetFlags) patch(fs *flag.FlagSet) (server.NodePatch, error) {
	var p server.NodePatch
	given := map[string]func(){
		"priority":              func() { p.Priority = f.priority },
		"role":                  func() { p.Role = f.role },
		"peer-url":              func() { p.PeerURL = f.peerURL },
		"peer-token":            func() { p.PeerToken = f.peerToken },
		"peer-token-file":       func() { p.PeerToken = f.peerToken },
		"address":               func() { p.Address = f.address },
		"peer-fingerprint":      func() { p.PeerFingerprint = f.peerFP },
		"allow-replicated-exec": func() { p.AllowReplicatedExec = f.allowExec },
		"router-id":             func() { p.RouterID = f.routerID },
		"bgp-source":            func() { p.BGPSource = f.bgpSource },
		"replication":           func() { p.Replication = f.replication },
		"follower-fingerprint": func() {
			fps := splitList(*f.followerFPs)
			p.FollowerFingerprints = &fps
		},
	}
	fs.Visit(func(fl *flag.Flag) {
		if set := given[fl.Name]; set != nil {
			set()
		}
	})
	if *f.peerCA != "" {
		b, err := os.ReadFile(*f.peerCA)
		if err != nil {
			return p, fmt.Errorf("peer-ca: %w", err)
		}
		pem := string(b)
		p.PeerCA = &pem
	} else if flagGiven(fs, "peer-ca") {
		p.PeerCA = f.peerCA
	}
	return p, nil
}

func nodeShow(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("node show", "[--json]",
		"Show this director's node settings and, when the daemon runs with settings.redundancy, its role,\n"+
			"the master, the last advert, the sync daemon, replication and the latest transitions. It prints the\n"+
			"fingerprint of the certificate this director shows its peers, for their node set --peer-fingerprint,\n"+
			"and that certificate's file: the one serve runs with, else the one it last started with (its\n"+
			"--tls-cert), else the self-signed one that serve makes unless given --tls-cert (made now if missing).")
	asJSON := fs.Bool("json", false, "print JSON")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "ipvsctl node show: takes no arguments")
		return exitUsage
	}
	ctx := context.Background()
	if g.server == "" {
		// The fingerprint can be given to the peer before the first serve.
		if _, _, err := httpd.SelfSigned(filepath.Dir(g.db)); err != nil {
			return env.fail("node show", fmt.Errorf("this director's certificate: %w", err), false)
		}
	}
	b, err := env.backend(ctx, g)
	if err != nil {
		return env.fail("node show", err, false)
	}
	defer b.close()
	v, err := b.NodeSettings(ctx)
	if err != nil {
		return env.fail("node show", err, false)
	}
	if *asJSON {
		return env.printJSON("node show", v)
	}
	printNode(env.stdout, v)
	return exitOK
}

func printNode(w io.Writer, v *server.NodeView) {
	fmt.Fprintf(w, "priority:    %d\n", v.Priority)
	fmt.Fprintf(w, "role:        %s\n", v.Role)
	peer := orDefault(v.PeerURL, "none")
	if v.PeerURL != "" {
		peer += map[bool]string{true: " (token set)", false: " (no token)"}[v.PeerTokenSet]
	}
	fmt.Fprintf(w, "peer:        %s\n", peer)
	if v.PeerURL != "" || v.PeerFingerprint != "" {
		fmt.Fprintf(w, "peer pin:    %s\n", orDefault(v.PeerFingerprint, "none (an http:// peer on loopback only)"))
	}
	if v.Replication != "" && v.Replication != server.ReplicationPair || v.PeerCA != "" || len(v.FollowerFingerprints) > 0 {
		fmt.Fprintf(w, "directors:   %s\n", directorsLine(v))
	}
	fmt.Fprintf(w, "replicated exec checks: %s\n", map[bool]string{true: "allowed", false: "refused"}[v.AllowReplicatedExec])
	printIdentity(w, v)
	fmt.Fprintf(w, "address:     %s\n", orDefault(v.Address, "from the interfaces"))
	printNodeBGP(w, v)
	r := v.Redundancy
	if r == nil {
		fmt.Fprintln(w, "redundancy:  not running (no daemon, or no settings.redundancy)")
		return
	}
	fmt.Fprintf(w, "redundancy:  %s\n", redundancyLine(r))
	if r.Role != "standalone" {
		fmt.Fprintf(w, "adverts:     %s\n", advertsLine(r))
	}
	if r.Replication != nil {
		fmt.Fprintf(w, "replication: %s\n", replicationLine(r.Replication))
		for _, c := range r.Replication.Conflicts {
			fmt.Fprintf(w, "  conflict at %s: %s won; kept %s; lost %s\n", c.At.Local().Format(time.DateTime), c.Winner, c.Kept, c.Lost)
		}
	}
	if len(r.Transitions) > 0 {
		fmt.Fprintln(w, "transitions (latest last):")
		from := max(0, len(r.Transitions)-10)
		for _, t := range r.Transitions[from:] {
			fmt.Fprintf(w, "  %s  %s  %s -> %s: %s\n", t.At.Local().Format("2006-01-02 15:04:05.000"), t.Family, t.From, t.To, t.Reason)
		}
	}
}

// printIdentity prints the fingerprint the peers pin and which certificate
// it is of: node show without the daemon knows only what serve recorded.
func printIdentity(w io.Writer, v *server.NodeView) {
	fp := v.Fingerprint
	if fp == "" {
		fp = "unknown (" + orDefault(v.FingerprintError, "no certificate") + ")"
		if v.IdentityCert != "" {
			fp += "; run node show while serve runs, or openssl x509 -noout -fingerprint -sha256 -in " + v.IdentityCert
		}
	}
	fmt.Fprintf(w, "fingerprint: %s\n", fp)
	if v.IdentityCert == "" {
		return
	}
	var from string
	switch v.IdentityFrom {
	case server.IdentityServed:
		from = "the one this daemon serves"
	case server.IdentityLastServe:
		from = "the one serve last started with; started with another --tls-cert it shows that one"
	default:
		from = "self-signed; serve has not started yet: it shows this one unless given --tls-cert FILE, then FILE"
	}
	fmt.Fprintf(w, "certificate: %s (%s)\n", v.IdentityCert, from)
}

// redundancyLine is one line on the director's role: status and node show print it.
func redundancyLine(r *server.RedundancyStatus) string {
	if r.Role == "standalone" {
		return "no settings.redundancy (replication only)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s", r.Role)
	if r.Forced {
		b.WriteString(" (forced)")
	}
	fmt.Fprintf(&b, " of VRID %d on %s, priority %d", r.VRID, r.Interface, r.Priority)
	if r.Fault != "" {
		fmt.Fprintf(&b, ", fault: %s", r.Fault)
	}
	if r.Master != "" && r.Role != "master" {
		fmt.Fprintf(&b, "; master %s (priority %d)", r.Master, r.MasterPriority)
	}
	if r.LastAdvertAge != nil {
		fmt.Fprintf(&b, ", last advert %.1fs ago", *r.LastAdvertAge)
	}
	if len(r.VIPs) > 0 {
		fmt.Fprintf(&b, "; VIPs %s", strings.Join(r.VIPs, " "))
	}
	switch {
	case !r.SyncDaemon.Enabled:
	case r.SyncDaemon.Error != "":
		fmt.Fprintf(&b, "; sync daemon: %s", r.SyncDaemon.Error)
	case len(r.SyncDaemon.Running) > 0:
		fmt.Fprintf(&b, "; %s", strings.Join(r.SyncDaemon.Running, ", "))
	}
	for _, f := range r.Families {
		if f.PreemptWait != "" {
			fmt.Fprintf(&b, "; %s preemption waits for %s", f.Family, f.PreemptWait)
		}
	}
	return b.String()
}

// advertsLine says how the adverts are authenticated and what was refused.
func advertsLine(r *server.RedundancyStatus) string {
	s := "authentication " + orDefault(r.Auth, "none")
	if r.Auth == "none" {
		s += " (any host on the link can forge them: settings.redundancy.auth)"
	}
	if r.AuthError != "" {
		s += "; key files: " + r.AuthError
	}
	for _, f := range r.Families {
		var parts []string
		for _, reason := range slices.Sorted(maps.Keys(f.Dropped)) {
			if n := f.Dropped[reason]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", reason, n))
			}
		}
		if len(parts) > 0 {
			s += fmt.Sprintf("; %s dropped: %s", f.Family, strings.Join(parts, ", "))
		}
	}
	return s
}

func replicationLine(r *server.ReplicationStatus) string {
	s := "from " + r.Peer
	switch {
	case !r.Connected && r.Error != "":
		s += ", unreachable: " + r.Error
	case r.InSync:
		s += ", in sync"
	case r.Error != "":
		s += ", not in sync: " + r.Error
	default:
		s += ", not in sync"
	}
	s += fmt.Sprintf(", peer revision %d, lag %.1fs", r.PeerRevision, r.LagSeconds)
	if r.LastCopy != nil {
		s += fmt.Sprintf(", last change arrived %.3fs after it was made", r.LastCopySeconds)
	}
	return s
}

// directorsLine says how this director takes part in replication between
// directors and whom it believes there.
func directorsLine(v *server.NodeView) string {
	s := orDefault(v.Replication, server.ReplicationPair)
	switch v.Replication {
	case server.ReplicationFollower:
		s += " of " + orDefault(v.PeerURL, "(no --peer-url)") + ", local edits refused"
	case server.ReplicationSource:
		s += ", edits are made here"
	}
	if len(v.FollowerFingerprints) > 0 {
		s += "; followers pinned: " + strings.Join(v.FollowerFingerprints, ", ")
	}
	if v.PeerCA != "" {
		s += "; pair CA: " + v.PeerCA
	}
	return s
}

func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// followerLine is one director following this one (or refused), as status prints it.
func followerLine(f server.FollowerStatus) string {
	id := shortFingerprint(f.Fingerprint)
	if f.Refused {
		return fmt.Sprintf("%s [%s] refused at %s: %s", f.Address, id, f.LastSeen.Local().Format(time.DateTime), f.Error)
	}
	s := f.Name
	if f.Address != f.Name {
		s += " (" + f.Address + ")"
	}
	s += " [" + id + "]"
	switch {
	case f.InSync:
		s += ", in sync"
	default:
		s += fmt.Sprintf(", behind by %.1fs", f.LagSeconds)
	}
	s += fmt.Sprintf(", has revision %d", f.Revision)
	if f.Connected {
		s += ", connected"
	} else {
		s += fmt.Sprintf(", last seen %s ago", time.Since(f.LastSeen).Round(100*time.Millisecond))
	}
	if f.Error != "" {
		s += "; its error: " + f.Error
	}
	return s
}

// shortFingerprint is enough of a fingerprint to tell directors apart.
func shortFingerprint(fp string) string {
	if len(fp) > len(trust.Prefix)+16 {
		return fp[:len(trust.Prefix)+16] + "…"
	}
	return orDefault(fp, "no certificate")
}
