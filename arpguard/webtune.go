package arpguard

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/ipvsctl/ipvsctl/arpguard/webconf"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/tune"
)

// The web server that answers on a real server (nginx or HAProxy) caps
// what the director can send as surely as its kernel does: the check finds
// each one running in the real server's network namespace by its process,
// has it dump its own configuration (nginx -T; HAProxy's files after
// haproxy -c), and reads the file limit its workers run with and the CPUs.

// WebServer is one nginx or HAProxy a check found running.
type WebServer struct {
	Kind   string // "nginx" or "haproxy"
	PID    int    // the master (or only) process
	Exe    string // its binary, as /proc/PID/exe names it
	Args   string // what push passes back to it: nginx's -p/-c, HAProxy's -f ones
	NoFile string // open-files soft limit of a worker ("-" unknown)
	Unit   string // its systemd unit ("-" none)
	Dump   string // the configuration as it dumped it (or its error)
	OK     bool   // nginx -T / haproxy -c passed
}

// webDumpBegin/End fence a web server's dump in the check's answer, so that
// no line of a configuration is taken for one of the check's own.
const (
	webDumpBegin = "@@ipvsctl-webdump-begin "
	webDumpEnd   = "@@ipvsctl-webdump-end "
)

// renderWebCheck is the read-only part of the check that finds and dumps
// the web servers: "cpus N", "systemd yes", then for each
// "web KIND PID NOFILE UNIT EXE ARGS..." and its fenced dump, then
// "webcheck PID ok|failed".
func renderWebCheck() string {
	return `echo "cpus $(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)"
[ ! -d /run/systemd/system ] || echo 'systemd yes'
self=$(readlink /proc/$$/ns/net)
for d in /proc/[0-9]*; do
  pid=${d#/proc/}
  # read, not cat: no process started for each of the host's processes.
  read -r comm 2>/dev/null < "$d/comm" || continue
  case "$comm" in nginx|haproxy) ;; *) continue ;; esac
  [ "$(readlink "$d/ns/net" 2>/dev/null)" = "$self" ] || continue
  ppid=$(awk '/^PPid:/ {print $2}' "$d/status" 2>/dev/null)
  # A worker: its master is read instead.
  [ "$(cat "/proc/${ppid:-0}/comm" 2>/dev/null)" != "$comm" ] || continue
  exe=$(readlink "$d/exe" 2>/dev/null); exe=${exe% (deleted)}
  [ -x "${exe:-/nonexistent}" ] || exe=$(command -v "$comm") || continue
  w=$(cat "$d"/task/*/children 2>/dev/null | awk '{print $1; exit}')
  nofile=$(awk '/^Max open files/ {print $4}' "/proc/${w:-$pid}/limits" 2>/dev/null)
  unit=$(sed -n 's|^0::.*/\([^/]*\.service\)$|\1|p' "$d/cgroup" 2>/dev/null | head -n 1)
  if [ "$comm" = nginx ]; then
    # nginx rewrites its argv: "nginx: master process /usr/sbin/nginx -c FILE".
    title=$(tr '\0' ' ' < "$d/cmdline")
    args=""
    p=$(printf '%s\n' "$title" | sed -n 's/.* -p \([^ ]*\).*/\1/p'); [ -z "$p" ] || args="-p $p"
    c=$(printf '%s\n' "$title" | sed -n 's/.* -c \([^ ]*\).*/\1/p'); [ -z "$c" ] || args="$args -c $c"
    printf 'web nginx %s %s %s %s %s\n' "$pid" "${nofile:--}" "${unit:--}" "$exe" "$args"
    echo "` + webDumpBegin + `$pid@@"
    if "$exe" $args -T 2>&1; then st=ok; else st=failed; fi
  else
    args=$(tr '\0' '\n' < "$d/cmdline" | awk 'f {printf "-f %s ", $0; f=0} $0 == "-f" {f=1}')
    printf 'web haproxy %s %s %s %s %s\n' "$pid" "${nofile:--}" "${unit:--}" "$exe" "$args"
    echo "` + webDumpBegin + `$pid@@"
    if out=$("$exe" -c $args 2>&1); then st=ok; else st=failed; printf '%s\n' "$out"; fi
    if [ $st = ok ]; then
      for f in $(printf '%s\n' $args | grep -v '^-f$'); do
        if [ -d "$f" ]; then set -- "$f"/*.cfg; else set -- "$f"; fi
        for g in "$@"; do [ -f "$g" ] || continue; echo "# configuration file $g:"; cat "$g"; echo; done
      done
    fi
  fi
  echo
  echo "` + webDumpEnd + `$pid@@"
  echo "webcheck $pid $st"
done
`
}

// parseWebCheck takes the web servers' lines and fenced dumps out of a
// check's answer; rest is the answer without them.
func parseWebCheck(out string) (r webReading, rest string) {
	var b strings.Builder
	var cur *WebServer
	var dump strings.Builder
	for line := range strings.Lines(out) {
		t := strings.TrimRight(line, "\n")
		if cur != nil {
			if t == webDumpEnd+strconv.Itoa(cur.PID)+"@@" {
				cur.Dump = strings.TrimSuffix(dump.String(), "\n")
				cur = nil
				dump.Reset()
			} else {
				dump.WriteString(line)
			}
			continue
		}
		f := strings.Fields(t)
		switch {
		case len(f) >= 6 && f[0] == "web":
			pid, _ := strconv.Atoi(f[2])
			r.Web = append(r.Web, WebServer{Kind: f[1], PID: pid, NoFile: f[3], Unit: f[4], Exe: f[5], Args: strings.Join(f[6:], " ")})
		case strings.HasPrefix(t, webDumpBegin) && len(r.Web) > 0:
			cur = &r.Web[len(r.Web)-1]
		case len(f) == 3 && f[0] == "webcheck":
			for i := range r.Web {
				if strconv.Itoa(r.Web[i].PID) == f[1] {
					r.Web[i].OK = f[2] == "ok"
				}
			}
		case len(f) == 2 && f[0] == "cpus":
			r.CPUs, _ = strconv.Atoi(f[1])
		case len(f) == 2 && f[0] == "systemd":
			r.Systemd = f[1] == "yes"
		default:
			b.WriteString(line)
		}
	}
	return r, b.String()
}

type webReading struct {
	CPUs    int
	Systemd bool
	Web     []WebServer
}

// WebFindings holds each web server a check found against its manual.
func WebFindings(r *TuneReading) []tune.Finding {
	var out []tune.Finding
	somax, _ := strconv.Atoi(r.Sysctls["net.core.somaxconn"])
	for _, w := range r.Web {
		h := webconf.Host{CPUs: r.CPUs, Somaxconn: somax}
		switch w.NoFile {
		case "-", "":
		case "unlimited":
			h.NoFile = -1
		default:
			h.NoFile, _ = strconv.ParseInt(w.NoFile, 10, 64)
		}
		fs, err := webFindings(w, h)
		if err != nil {
			out = append(out, tune.Finding{Setting: fmt.Sprintf("%s (pid %d) configuration", w.Kind, w.PID), Current: "unreadable",
				Recommended: "a configuration that " + map[string]string{"nginx": "nginx -t", "haproxy": "haproxy -c"}[w.Kind] + " passes",
				Status:      tune.Far, Kind: tune.KindManual, Source: w.Exe + " " + w.Args, Why: err.Error()})
			continue
		}
		out = append(out, fs...)
		if f, ok := noFileFinding(w, r.Systemd); ok {
			out = append(out, f)
		}
	}
	return out
}

func webFindings(w WebServer, h webconf.Host) ([]tune.Finding, error) {
	if !w.OK {
		msg := strings.TrimSpace(w.Dump)
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		return nil, fmt.Errorf("the configuration on disk does not pass its check, so a reload would fail (the running one is older): %s", msg)
	}
	files, err := webconf.SplitNginxDump(w.Dump)
	if err != nil {
		return nil, err
	}
	switch w.Kind {
	case "nginx":
		ds, err := webconf.ParseNginx(files)
		if err != nil {
			return nil, err
		}
		return webconf.NginxFindings(ds, files[0].Path, h), nil
	case "haproxy":
		return webconf.HAProxyFindings(webconf.ParseHAProxy(files), files[0].Path, h), nil
	}
	return nil, fmt.Errorf("%s: not a web server tune reads", w.Kind)
}

// TuneWebJournal is where push --apply records each web-server file it
// wrote, with the bytes it replaced (or that there were none).
func (p Paths) TuneWebJournal() string {
	return path.Join(path.Dir(p.Journal), "realserver-tune-web.journal")
}

// nginxDropIn is what push --apply writes for one nginx: the directives of
// its http block that are unset there and worth setting, in a file of
// their own under a directory the http block includes.
type nginxDropIn struct {
	Server WebServer
	Path   string
	Lines  []string // directives, each ending in ';'
}

// Content is the drop-in file's text.
func (d nginxDropIn) Content() string {
	var b strings.Builder
	b.WriteString("# Written by ipvsctl realserver tune push --apply; ipvsctl realserver tune undo removes it.\n")
	b.WriteString("# Each directive's rule: nginx.org's manual, the directive's own entry.\n")
	for _, l := range d.Lines {
		b.WriteString(l + "\n")
	}
	return b.String()
}

// nginxDropIns are the drop-ins push --apply writes for a reading.
func nginxDropIns(r *TuneReading) []nginxDropIn {
	var out []nginxDropIn
	somax, _ := strconv.Atoi(r.Sysctls["net.core.somaxconn"])
	for _, w := range r.Web {
		if w.Kind != "nginx" || !w.OK {
			continue
		}
		files, err := webconf.SplitNginxDump(w.Dump)
		if err != nil {
			continue
		}
		ds, err := webconf.ParseNginx(files)
		if err != nil {
			continue
		}
		d := nginxDropIn{Server: w, Path: webconf.NginxDropIn(ds)}
		for _, f := range webconf.NginxFindings(ds, files[0].Path, webconf.Host{CPUs: r.CPUs, Somaxconn: somax}) {
			if f.Kind == webconf.KindNginxDropIn && f.Status != tune.OK && f.Value != "" {
				d.Lines = append(d.Lines, f.Value)
			}
		}
		if d.Path != "" && len(d.Lines) > 0 {
			out = append(out, d)
		}
	}
	return out
}

// nginxCmd is the nginx binary with the -p/-c it runs with, quoted.
func nginxCmd(w WebServer) string {
	words := []string{shq(w.Exe)}
	for _, a := range strings.Fields(w.Args) {
		words = append(words, shq(a))
	}
	return strings.Join(words, " ")
}

// RenderNginxDropInPush writes a drop-in, journals (first time only) the
// bytes and mode it replaces, and reloads nginx only when nginx -t passes
// with it; when it does not, the file is put back as it was and nginx
// keeps running its old configuration (the script fails, saying why).
func RenderNginxDropInPush(d nginxDropIn, journal string) string {
	var b strings.Builder
	// NGINX, journaled, is how undo validates and reloads this nginx.
	fmt.Fprintf(&b, "#!/bin/sh\n# ipvsctl realserver tune push --apply: nginx drop-in\nset -eu\numask 022\nf=%s\nj=%s\nNGINX=%s\n",
		shq(d.Path), shq(journal), shq(strings.TrimSpace(d.Server.Exe+" "+d.Server.Args)))
	b.WriteString(`mkdir -p "$(dirname "$j")"
touch "$j"
if ! awk -F '\t' -v f="$f" '$1 == "nginx-dropin" && $2 == f {found=1} END {exit !found}' "$j"; then
  if [ -e "$f" ]; then
    b64=$(base64 -w0 < "$f")
    printf 'nginx-dropin\t%s\tfile\t%s\t%s\t%s\n' "$f" "$(stat -c %a "$f")" "${b64:--}" "$NGINX" >> "$j"
  else
    printf 'nginx-dropin\t%s\tabsent\t-\t-\t%s\n' "$f" "$NGINX" >> "$j"
  fi
fi
old=$(mktemp)
had=0
if [ -e "$f" ]; then cp -p "$f" "$old"; had=1; fi
`)
	fmt.Fprintf(&b, "printf '%%s' %s > \"$f.ipvsctl-new\"\nchmod 644 \"$f.ipvsctl-new\"\nmv \"$f.ipvsctl-new\" \"$f\"\n", shq(d.Content()))
	fmt.Fprintf(&b, `if out=$(%[1]s -t 2>&1); then
  %[1]s -s reload
  rm -f "$old"
  echo "changed: nginx drop-in $f: "%[2]s
else
  if [ $had = 1 ]; then mv "$old" "$f"; else rm -f "$f" "$old"; fi
  echo "nginx -t refused the drop-in $f, put back as it was; nginx keeps its running configuration: $out" >&2
  exit 3
fi
`, nginxCmd(d.Server), shq(strings.Join(d.Lines, " ")))
	return b.String()
}

// RenderTuneWebUndo puts back each file the journal names, byte for byte
// (or removes it when there was none), then has its nginx validate and
// reload; the journal goes once every file is back.
func RenderTuneWebUndo(journal string) string {
	return fmt.Sprintf(`#!/bin/sh
# ipvsctl realserver tune undo: web servers
set -eu
j=%s
[ -f "$j" ] || exit 0
tab=$(printf '\t')
while IFS="$tab" read -r kind f state mode b64 cmd; do
  case "$kind" in nginx-dropin|systemd-dropin) ;; *) continue ;; esac
  case "$state" in
  absent) rm -f "$f" ;;
  absent-dir) rm -f "$f"; rmdir "$(dirname "$f")" 2>/dev/null || true ;;
  *)
    if [ "$b64" = - ]; then : > "$f.ipvsctl-old"; else printf '%%s' "$b64" | base64 -d > "$f.ipvsctl-old"; fi
    chmod "$mode" "$f.ipvsctl-old"
    mv "$f.ipvsctl-old" "$f"
    ;;
  esac
  if [ "$kind" = systemd-dropin ]; then
    systemctl daemon-reload
    echo "undone: systemd drop-in $f"
  elif out=$($cmd -t 2>&1); then
    $cmd -s reload
    echo "undone: nginx drop-in $f"
  else
    echo "undone: nginx drop-in $f, but nginx -t fails now, so nginx was not reloaded: $out"
  fi
done < "$j"
rm -f "$j"
`, shq(journal))
}

// pushWeb reads the web servers and writes each nginx drop-in there is
// reason for; a drop-in nginx -t refuses fails the run, the old
// configuration still running.
func (p *Pusher) pushWeb(ctx context.Context, c *ssh.Client, r *Result) error {
	out, err := p.run(ctx, c, RenderTuneCheck())
	if err != nil {
		return fmt.Errorf("read the web servers: %w", err)
	}
	reading, err := ParseTuneCheck(out)
	if err != nil {
		return err
	}
	for _, d := range nginxDropIns(reading) {
		out, err := p.run(ctx, c, RenderNginxDropInPush(d, p.cfg.Paths.TuneWebJournal()))
		r.Changed = append(r.Changed, prefixedLines(out, "changed: ")...)
		if err != nil {
			return fmt.Errorf("nginx (pid %d) drop-in %s: %w", d.Server.PID, d.Path, err)
		}
	}
	done := map[string]bool{}
	for _, w := range reading.Web {
		f, ok := noFileFinding(w, reading.Systemd)
		if !ok || f.Kind != KindNoFileOverride || done[w.Unit] {
			continue
		}
		done[w.Unit] = true
		file := p.cfg.Paths.NoFileOverride(w.Unit)
		out, err := p.run(ctx, c, RenderNoFileOverridePush(w.Unit, file, p.cfg.Paths.TuneWebJournal()))
		r.Changed = append(r.Changed, prefixedLines(out, "changed: ")...)
		if err != nil {
			return fmt.Errorf("%s's systemd drop-in %s: %w", w.Unit, file, err)
		}
	}
	return nil
}
