package arpguard

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/tune"
)

// A real server behind a busy director takes many short connections: its
// accept queues, SYN backlog, ephemeral ports, TIME_WAIT table, socket
// buffers and file limits decide how many it keeps up with. TCPSettings are
// those sysctls with the floor each should have; push raises those below it
// (never lowers one), records what it replaced and undo puts that back.
type TCPSetting struct {
	Key    string // dotted sysctl name
	Want   string // the value push writes
	Why    string
	Source string // where the setting and its meaning are documented
	// Host marks a setting of the whole host rather than of a network
	// namespace: a real server that is a namespace (a container) may not
	// see it, and then only its host can change it.
	Host bool
	// ok reports whether the value now is good enough.
	ok func(cur string) bool
}

const (
	srcIPSysctl  = "Documentation/networking/ip-sysctl.rst"
	srcNetSysctl = "Documentation/admin-guide/sysctl/net.rst"
	srcFSSysctl  = "Documentation/admin-guide/sysctl/fs.rst"
)

// TCPSettings are the real-server sysctls tune looks at: the network
// namespace's own TCP settings first, then the host-wide buffer caps,
// input queue and file limits.
func TCPSettings() []TCPSetting {
	return []TCPSetting{
		{"net.core.somaxconn", "4096", "caps every listen() backlog: a burst of connections the director sends beyond it is dropped (SYNs retried after 1 s, 3 s...)", srcIPSysctl, false, atLeast(0, 4096)},
		{"net.ipv4.tcp_max_syn_backlog", "8192", "half-open connections held per listener while handshakes complete; past it SYNs are dropped or answered with cookies", srcIPSysctl, false, atLeast(0, 8192)},
		{"net.ipv4.ip_local_port_range", "10000 65000", "ephemeral ports for the real server's own outgoing connections (to databases, upstreams): at a few thousand a second the default 28,000 run out within a TIME_WAIT", srcIPSysctl, false, portSpan(40000)},
		{"net.ipv4.tcp_max_tw_buckets", "262144", "TIME_WAIT sockets kept; past it they are destroyed early and the kernel logs 'time wait bucket table overflow'", srcIPSysctl, false, atLeast(0, 262144)},
		{"net.ipv4.tcp_rmem", "4096 131072 16777216", "the receive buffer autotuning may grow a socket to (third figure): 16 MiB covers a fast client far away", srcIPSysctl, false, atLeast(2, 16777216)},
		{"net.ipv4.tcp_wmem", "4096 16384 16777216", "the send buffer autotuning may grow a socket to (third figure): 16 MiB keeps a long fat pipe full", srcIPSysctl, false, atLeast(2, 16777216)},
		{"net.core.rmem_max", "16777216", "the largest receive buffer an application may set with SO_RCVBUF (a server that sets its own, as many proxies do, is held to it; autotuning is not); the host's on older kernels, a namespace's on newer ones", srcNetSysctl, true, atLeast(0, 16777216)},
		{"net.core.wmem_max", "16777216", "the largest send buffer an application may set with SO_SNDBUF; the host's on older kernels, a namespace's on newer ones", srcNetSysctl, true, atLeast(0, 16777216)},
		{"net.core.netdev_max_backlog", "16384", "packets queued per CPU between the NIC and the stack; past it input is dropped (the second column of /proc/net/softnet_stat counts them) when a burst from the director arrives faster than a CPU takes it", srcNetSysctl, true, atLeast(0, 16384)},
		{"fs.file-max", "2097152", "open files on the whole host; every connection is one, and at the limit accept() fails with ENFILE for every process", srcFSSysctl, true, atLeast(0, 2097152)},
		{"fs.nr_open", "1048576", "the most a process's open-files limit (RLIMIT_NOFILE, systemd's LimitNOFILE=) can be raised to", srcFSSysctl, true, atLeast(0, 1048576)},
	}
}

// atLeast: field i (space separated) of the value is at least n.
func atLeast(i int, n int64) func(string) bool {
	return func(cur string) bool {
		f := strings.Fields(cur)
		if i >= len(f) {
			return false
		}
		v, err := strconv.ParseInt(f[i], 10, 64)
		return err == nil && v >= n
	}
}

func portSpan(n int) func(string) bool {
	return func(cur string) bool {
		f := strings.Fields(cur)
		if len(f) != 2 {
			return false
		}
		lo, err1 := strconv.Atoi(f[0])
		hi, err2 := strconv.Atoi(f[1])
		return err1 == nil && err2 == nil && hi-lo >= n
	}
}

// TuneJournal is where push records the values it replaced, beside the
// ARP-hiding journal; TuneSysctlConf the sysctl.d file it writes.
func (p Paths) TuneJournal() string { return path.Join(path.Dir(p.Journal), "realserver-tune.journal") }
func (p Paths) TuneSysctlConf() string {
	return path.Join(path.Dir(p.SysctlConf), "91-ipvsctl-realserver-tcp.conf")
}

// RenderTuneCheck is the read-only script that prints, one per line,
// "sysctl KEY VALUE" ("sysctl KEY -" for one this namespace does not
// see), "readonly KEY" for a host setting it may not write, "listen ADDR:PORT BACKLOG PID" (Send-Q of a
// listening socket is its backlog) and "nofile PID SOFT HARD".
func RenderTuneCheck() string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# ipvsctl realserver tune check: read-only\nset -u\n")
	for _, s := range TCPSettings() {
		p := procPath(strings.ReplaceAll(s.Key, ".", "/"))
		fmt.Fprintf(&b, "if [ -r %[2]s ]; then printf 'sysctl %[1]s %%s\\n' \"$(tr -s '\\t ' '  ' < %[2]s)\"; else echo 'sysctl %[1]s -'; fi\n", s.Key, p)
		if s.Host {
			fmt.Fprintf(&b, "[ ! -e %[2]s ] || [ -w %[2]s ] || echo 'readonly %[1]s'\n", s.Key, p)
		}
	}
	b.WriteString(`ss -lntpH 2>/dev/null | while read -r state recvq sendq local peer proc; do
  pid=$(printf '%s' "${proc:-}" | sed -n 's/.*pid=\([0-9]*\).*/\1/p')
  printf 'listen %s %s %s\n' "$local" "$sendq" "${pid:--}"
  if [ -n "$pid" ] && [ -r /proc/$pid/limits ]; then
    awk -v pid="$pid" '/^Max open files/ {print "nofile " pid " " $4 " " $5}' /proc/$pid/limits
  fi
done
`)
	b.WriteString(renderWebCheck())
	return b.String()
}

// RenderTunePush raises the settings below their floor, now and in a
// sysctl.d file, recording in the journal (first time only) what each had.
func RenderTunePush(p Paths) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n# ipvsctl realserver tune push\nset -eu\numask 022\nmkdir -p %s %s\ntouch %s\n",
		shq(path.Dir(p.TuneJournal())), shq(path.Dir(p.TuneSysctlConf())), shq(p.TuneJournal()))
	fmt.Fprintf(&b, "conf=$(mktemp)\nprintf '# Written by ipvsctl realserver tune push; ipvsctl realserver tune undo removes it.\\n' > \"$conf\"\n")
	for _, s := range TCPSettings() {
		proc := procPath(strings.ReplaceAll(s.Key, ".", "/"))
		// A host-wide setting a namespace does not see (or may not write) is its host's to change.
		fmt.Fprintf(&b, "if [ ! -w %s ]; then :\n", proc)
		fmt.Fprintf(&b, "elif cur=$(tr -s '\\t ' '  ' < %s); %s; then\n", proc, shellCheck(s, "$cur"))
		// Set by an earlier push: it stays in the file at the value it has.
		fmt.Fprintf(&b, "  if grep -q %s %s; then printf '%s = %%s\\n' \"$cur\" >> \"$conf\"; fi\n",
			shq("^"+s.Key+"\t"), shq(p.TuneJournal()), s.Key)
		b.WriteString("else\n")
		fmt.Fprintf(&b, "  grep -q %s %s || printf '%s\\t%%s\\n' \"$cur\" >> %s\n", shq("^"+s.Key+"\t"), shq(p.TuneJournal()), s.Key, shq(p.TuneJournal()))
		fmt.Fprintf(&b, "  printf '%%s\\n' %s > %s\n", shq(s.Want), proc)
		fmt.Fprintf(&b, "  printf '%s = %%s\\n' %s >> \"$conf\"\n", s.Key, shq(s.Want))
		fmt.Fprintf(&b, "  echo \"changed: %s $cur -> \"%s\n", s.Key, shq(s.Want))
		b.WriteString("fi\n")
	}
	// Only the header: nothing of push's to keep at boot.
	fmt.Fprintf(&b, "if [ \"$(wc -l < \"$conf\")\" -le 1 ] && [ ! -f %[1]s ]; then rm -f \"$conf\"\n"+
		"elif ! cmp -s \"$conf\" %[1]s; then mv \"$conf\" %[1]s; chmod 644 %[1]s; else rm -f \"$conf\"; fi\n", shq(p.TuneSysctlConf()))
	return b.String()
}

// RenderTuneUndo writes back every value the journal holds, then removes
// the journal and the sysctl.d file.
func RenderTuneUndo(p Paths) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n# ipvsctl realserver tune undo\nset -eu\nj=%s\n", shq(p.TuneJournal()))
	b.WriteString("if [ -f \"$j\" ]; then\n  while IFS='\t' read -r key val; do\n    [ -n \"$key\" ] || continue\n    case \"$key\" in\n")
	for _, s := range TCPSettings() {
		fmt.Fprintf(&b, "    %s) printf '%%s\\n' \"$val\" > %s; echo \"undone: %s -> $val\" ;;\n", s.Key, procPath(strings.ReplaceAll(s.Key, ".", "/")), s.Key)
	}
	b.WriteString("    esac\n  done < \"$j\"\n  rm -f \"$j\"\nfi\n")
	fmt.Fprintf(&b, "rm -f %s\n", shq(p.TuneSysctlConf()))
	return b.String()
}

// shellCheck is the test, in sh, that the value in v is good enough for s.
func shellCheck(s TCPSetting, v string) string {
	switch s.Key {
	case "net.ipv4.ip_local_port_range":
		return fmt.Sprintf("set -- %s; [ $(($2 - $1)) -ge 40000 ]", v)
	case "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem":
		return fmt.Sprintf("set -- %s; [ \"$3\" -ge %s ]", v, strings.Fields(s.Want)[2])
	}
	return fmt.Sprintf("[ \"%s\" -ge %s ]", v, s.Want)
}

// Listener is one listening socket a check found.
type Listener struct {
	Addr    string
	Port    int
	Backlog int
	PID     int
	NoFile  string // soft limit of open files of its process ("" unknown)
}

// TuneReading is what a check read on one real server.
type TuneReading struct {
	Sysctls map[string]string
	// ReadOnly are the host settings this namespace sees but may not write.
	ReadOnly  map[string]bool
	Listeners []Listener
	// CPUs online, whether systemd runs there, and the web servers found.
	CPUs    int
	Systemd bool
	Web     []WebServer
}

// ParseTuneCheck reads the check script's output.
func ParseTuneCheck(out string) (*TuneReading, error) {
	r := &TuneReading{Sysctls: map[string]string{}, ReadOnly: map[string]bool{}}
	web, out := parseWebCheck(out)
	r.CPUs, r.Systemd, r.Web = web.CPUs, web.Systemd, web.Web
	nofile := map[int]string{}
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "sysctl":
			r.Sysctls[f[1]] = strings.Join(f[2:], " ")
		case "readonly":
			r.ReadOnly[f[1]] = true
		case "listen":
			if len(f) != 4 {
				continue
			}
			i := strings.LastIndexByte(f[1], ':')
			port, err := strconv.Atoi(f[1][i+1:])
			if i < 0 || err != nil {
				continue
			}
			bl, _ := strconv.Atoi(f[2])
			pid, _ := strconv.Atoi(f[3])
			r.Listeners = append(r.Listeners, Listener{Addr: f[1][:i], Port: port, Backlog: bl, PID: pid})
		case "nofile":
			if len(f) == 4 {
				pid, _ := strconv.Atoi(f[1])
				nofile[pid] = f[2]
			}
		}
	}
	for _, s := range TCPSettings() {
		if _, ok := r.Sysctls[s.Key]; !ok {
			return nil, fmt.Errorf("tune check: no value for %s in the real server's answer", s.Key)
		}
	}
	for i := range r.Listeners {
		r.Listeners[i].NoFile = nofile[r.Listeners[i].PID]
	}
	return r, nil
}

// TuneFindings compares a reading with the floors; ports (none: every
// listener but SSH's) are the application's, whose backlog and
// file-descriptor limit are checked.
func TuneFindings(r *TuneReading, ports []int) []tune.Finding {
	var out []tune.Finding
	for _, s := range TCPSettings() {
		cur := r.Sysctls[s.Key]
		f := tune.Finding{Setting: s.Key, Current: cur, Recommended: s.Want, Why: s.Why, Source: s.Source, Kind: tune.KindSysctl, Value: s.Want, Status: tune.OK}
		switch {
		case cur == "-" && s.Host:
			f.Status, f.Why = tune.Info, "not visible in this real server's namespace: the host's setting, change it on the host ("+s.Why+")"
		case r.ReadOnly[s.Key] && !s.ok(cur):
			f.Status, f.Why = tune.Info, "read-only in this real server's namespace: the host's setting, change it on the host ("+s.Why+")"
		case !s.ok(cur):
			f.Status = tune.Change
		}
		out = append(out, f)
	}
	somax, _ := strconv.Atoi(r.Sysctls["net.core.somaxconn"])
	want := map[int]bool{}
	for _, p := range ports {
		want[p] = true
	}
	ls := append([]Listener(nil), r.Listeners...)
	sort.Slice(ls, func(i, j int) bool {
		return ls[i].Port < ls[j].Port || ls[i].Port == ls[j].Port && ls[i].Addr < ls[j].Addr
	})
	for _, l := range ls {
		if len(ports) > 0 && !want[l.Port] || len(ports) == 0 && l.Port == 22 {
			continue
		}
		f := tune.Finding{Setting: fmt.Sprintf("listen backlog of %s:%d", l.Addr, l.Port), Current: strconv.Itoa(l.Backlog),
			Recommended: "4096 (the application's listen() backlog, and somaxconn above it)", Kind: tune.KindManual,
			Source: "listen(2), ss(8): Send-Q of a listening socket is its backlog", Status: tune.OK,
			Why: "the accept queue holds the connections the director sends while the application is busy"}
		switch {
		case l.Backlog >= 4096:
		case l.Backlog >= somax && somax < 4096:
			f.Status = tune.Change
			f.Why = fmt.Sprintf("capped by net.core.somaxconn %d: push raises it, then restart the application (the backlog is fixed at listen())", somax)
		default:
			f.Status = tune.Change
			f.Why = fmt.Sprintf("the application asked for %d in listen(): raise it in its configuration (nginx: listen ... backlog=4096; haproxy: backlog)", l.Backlog)
		}
		out = append(out, f)
		if l.NoFile != "" {
			nf := tune.Finding{Setting: fmt.Sprintf("open files of pid %d (port %d)", l.PID, l.Port), Current: l.NoFile,
				Recommended: "65536 or more (LimitNOFILE= in its systemd unit)", Kind: tune.KindManual, Status: tune.OK,
				Source: "getrlimit(2) RLIMIT_NOFILE; systemd.exec(5) LimitNOFILE=",
				Why:    "each connection is a file descriptor: at the limit accept() fails with EMFILE"}
			if n, err := strconv.ParseInt(l.NoFile, 10, 64); l.NoFile != "unlimited" && (err != nil || n < 65536) {
				nf.Status = tune.Change
			}
			out = append(out, nf)
		}
	}
	return append(out, WebFindings(r)...)
}

// TuneResult is one real server's tune check, push or undo.
type TuneResult struct {
	Result
	Findings []tune.Finding `json:"findings,omitempty"`
}

// TuneCheck reads each target's settings; ports as TuneFindings takes them.
func (p *Pusher) TuneCheck(ctx context.Context, targets []Target, ports []int) []TuneResult {
	return p.tuneEach(ctx, "tune check", targets, ports, nil)
}

// TunePush raises the settings below their floor; with web it also writes
// what may be written safely for the web servers (an nginx drop-in,
// validated before a reload), then reads everything back.
func (p *Pusher) TunePush(ctx context.Context, targets []Target, ports []int, web bool) []TuneResult {
	return p.tuneEach(ctx, "tune push", targets, ports, func(ctx context.Context, c *ssh.Client, r *Result) error {
		out, err := p.run(ctx, c, RenderTunePush(p.cfg.Paths))
		r.Changed = prefixedLines(out, "changed: ")
		if err != nil || !web {
			return err
		}
		return p.pushWeb(ctx, c, r)
	})
}

// TuneUndo puts back what push replaced.
func (p *Pusher) TuneUndo(ctx context.Context, targets []Target) []TuneResult {
	return p.tuneEach(ctx, "tune undo", targets, nil, func(ctx context.Context, c *ssh.Client, r *Result) error {
		out, err := p.run(ctx, c, RenderTuneWebUndo(p.cfg.Paths.TuneWebJournal()))
		r.Changed = prefixedLines(out, "undone: ")
		if err != nil {
			return err
		}
		out, err = p.run(ctx, c, RenderTuneUndo(p.cfg.Paths))
		r.Changed = append(r.Changed, prefixedLines(out, "undone: ")...)
		if err == nil {
			r.State = StateUndone
		}
		return err
	})
}

func (p *Pusher) tuneEach(ctx context.Context, action string, targets []Target, ports []int, change func(context.Context, *ssh.Client, *Result) error) []TuneResult {
	var mu sync.Mutex
	findings := map[int][]tune.Finding{}
	idx := map[string]int{}
	for i, t := range targets {
		idx[t.Label()] = i
	}
	rs := p.each(ctx, action, targets, func(ctx context.Context, c *ssh.Client, t Target, r *Result) error {
		if change != nil {
			if err := change(ctx, c, r); err != nil {
				return fmt.Errorf("%s: %w", action, err)
			}
			if r.State == StateUndone {
				return nil
			}
		}
		out, err := p.run(ctx, c, RenderTuneCheck())
		if err != nil {
			return fmt.Errorf("tune check: %w", err)
		}
		reading, err := ParseTuneCheck(out)
		if err != nil {
			return err
		}
		fs := TuneFindings(reading, ports)
		r.State, r.Drift = StatePrepared, nil
		for _, f := range fs {
			if f.Status != tune.OK && f.Status != tune.Info {
				r.State = StateDrift
				r.Drift = append(r.Drift, fmt.Sprintf("%s %s (want %s)", f.Setting, f.Current, f.Recommended))
			}
		}
		mu.Lock()
		findings[idx[t.Label()]] = fs
		mu.Unlock()
		return nil
	})
	out := make([]TuneResult, len(rs))
	for i, r := range rs {
		out[i] = TuneResult{Result: r, Findings: findings[i]}
	}
	return out
}
