package arpguard

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/tune"
)

// A web server's file limit is the one its service started with: nginx's
// workers and HAProxy inherit it, and only a restart changes it. Where
// systemd runs the service, push --apply writes LimitNOFILE= in a drop-in
// of its unit (and has systemd reload its units; the service is not
// restarted); elsewhere the limit is advice.

// KindNoFileOverride is a finding's Kind when push --apply writes the
// limit as a systemd drop-in of the web server's unit.
const KindNoFileOverride = "systemd-limitnofile"

// webNoFileWant is the open-files limit a web server's unit is given.
const webNoFileWant = 65536

// NoFileOverride is the drop-in of unit that push --apply writes, beside
// the units of Paths (/etc/systemd/system/UNIT.d/).
func (p Paths) NoFileOverride(unit string) string {
	return path.Join(path.Dir(p.Unit), unit+".d", "ipvsctl-tune-nofile.conf")
}

// noFileFinding is a web server's own file limit against webNoFileWant
// (ok false: its unit is not known, and the listener's finding says it).
func noFileFinding(w WebServer, systemd bool) (tune.Finding, bool) {
	if w.Unit == "-" || w.Unit == "" {
		return tune.Finding{}, false
	}
	f := tune.Finding{Setting: fmt.Sprintf("%s LimitNOFILE of %s", w.Kind, w.Unit), Current: w.NoFile,
		Recommended: fmt.Sprintf("%d (LimitNOFILE= in a drop-in of %s; at its next restart)", webNoFileWant, w.Unit),
		Status:      tune.OK, Kind: tune.KindManual, Source: "systemd.exec(5) LimitNOFILE=; getrlimit(2) RLIMIT_NOFILE",
		Why: "the file limit the service starts with, which its workers inherit: each connection is a descriptor (a proxied one two); " +
			"worker_rlimit_nofile or HAProxy's maxconn raise it only when the server starts as root"}
	if n, err := strconv.ParseInt(w.NoFile, 10, 64); w.NoFile != "unlimited" && (err != nil || n < webNoFileWant) {
		f.Status = tune.Change
		switch {
		case !systemd:
			f.Why = "systemd does not run here: raise it where the service is started; " + f.Why
		case !strings.HasPrefix(w.Unit, w.Kind):
			// A unit not named after the server (a container's, a
			// supervisor's) starts more than it: not push's to change.
			f.Why = fmt.Sprintf("%s runs inside %s, not a unit of its own: raise it there; %s", w.Kind, w.Unit, f.Why)
		default:
			f.Kind, f.Value = KindNoFileOverride, strconv.Itoa(webNoFileWant)
		}
	}
	return f, true
}

// RenderNoFileOverridePush writes unit's drop-in (journaled the first
// time with what was there, the directory too) and has systemd reload its
// units; the limit applies at the service's next restart, which is the
// operator's to choose.
func RenderNoFileOverridePush(unit, file, journal string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n# ipvsctl realserver tune push --apply: systemd drop-in\nset -eu\numask 022\nf=%s\nj=%s\n", shq(file), shq(journal))
	b.WriteString(`mkdir -p "$(dirname "$j")"
touch "$j"
if ! awk -F '\t' -v f="$f" '$1 == "systemd-dropin" && $2 == f {found=1} END {exit !found}' "$j"; then
  if [ -e "$f" ]; then
    b64=$(base64 -w0 < "$f")
    printf 'systemd-dropin\t%s\tfile\t%s\t%s\tsystemctl\n' "$f" "$(stat -c %a "$f")" "${b64:--}" >> "$j"
  elif [ -d "$(dirname "$f")" ]; then
    printf 'systemd-dropin\t%s\tabsent\t-\t-\tsystemctl\n' "$f" >> "$j"
  else
    printf 'systemd-dropin\t%s\tabsent-dir\t-\t-\tsystemctl\n' "$f" >> "$j"
  fi
fi
mkdir -p "$(dirname "$f")"
`)
	content := fmt.Sprintf("# Written by ipvsctl realserver tune push --apply; ipvsctl realserver tune undo removes it.\n[Service]\nLimitNOFILE=%d\n", webNoFileWant)
	fmt.Fprintf(&b, "printf '%%s' %s > \"$f.ipvsctl-new\"\nchmod 644 \"$f.ipvsctl-new\"\nmv \"$f.ipvsctl-new\" \"$f\"\n", shq(content))
	fmt.Fprintf(&b, "systemctl daemon-reload\necho \"changed: systemd drop-in $f: LimitNOFILE=%d (at the next restart of \"%s\")\"\n", webNoFileWant, shq(unit))
	return b.String()
}
