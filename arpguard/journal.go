package arpguard

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
)

// The journal is a text file on the real server, one record per change an
// apply made, in the order it made them. The shell scripts and the local
// executor read and write the same records:
//
//	sysctl KEY NEW PREVIOUS
//	module NAME
//	linkup DEV
//	address PREFIX DEV
//	arptables CHAIN ARGS...
//	route DST GATEWAY [PREVIOUS ROUTE AS "ip route" PRINTS IT]
//	dir PATH
//	file PATH
//
// A record's key is all of it but the previous value; a key is recorded once,
// so the oldest previous value, the one to restore, is kept.
type journal struct {
	path  string
	lines []string
}

func openJournal(path string) (*journal, error) {
	j := &journal{path: path}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return j, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			j.lines = append(j.lines, l)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read journal %s: %w", path, err)
	}
	return j, nil
}

func (j *journal) has(key string) bool {
	return slices.ContainsFunc(j.lines, func(l string) bool { return l == key || strings.HasPrefix(l, key+" ") })
}

// add records a change before it is made, so that a crash between the two
// leaves an undo that is at worst a no-op.
func (j *journal) add(key, prev string) error {
	if j.has(key) {
		return nil
	}
	line := key
	if prev != "" {
		line += " " + prev
	}
	f, err := os.OpenFile(j.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open journal: %w", err)
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("append to journal %s: %w", j.path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync journal %s: %w", j.path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close journal %s: %w", j.path, err)
	}
	j.lines = append(j.lines, line)
	return nil
}

// RouteSpec is a route as "ip route" prints it, reduced to the fields that
// "ip route replace" takes back.
type RouteSpec struct {
	Dst     netip.Prefix
	Gateway netip.Addr
	Dev     string
	Proto   string
	Scope   string
	Src     netip.Addr
	Metric  int
	OnLink  bool
}

func (r RouteSpec) String() string {
	var b strings.Builder
	if r.Dst.Bits() == 0 {
		b.WriteString("default")
	} else {
		b.WriteString(r.Dst.String())
	}
	if r.Gateway.IsValid() {
		b.WriteString(" via " + r.Gateway.String())
	}
	for _, kv := range [][2]string{{"dev", r.Dev}, {"proto", r.Proto}, {"scope", r.Scope}} {
		if kv[1] != "" {
			b.WriteString(" " + kv[0] + " " + kv[1])
		}
	}
	if r.Src.IsValid() {
		b.WriteString(" src " + r.Src.String())
	}
	if r.Metric != 0 {
		b.WriteString(" metric " + strconv.Itoa(r.Metric))
	}
	if r.OnLink {
		b.WriteString(" onlink")
	}
	return b.String()
}

// parseRouteSpec parses what RouteSpec.String and the scripts' route_line
// print; dst gives the family that "default" stands for.
func parseRouteSpec(dst netip.Prefix, fields []string) (RouteSpec, error) {
	r := RouteSpec{Dst: dst}
	if len(fields) == 0 {
		return r, errors.New("empty route")
	}
	for i := 1; i < len(fields); i++ {
		k := fields[i]
		if k == "onlink" {
			r.OnLink = true
			continue
		}
		if i+1 >= len(fields) {
			return r, fmt.Errorf("route %q: %s without a value", strings.Join(fields, " "), k)
		}
		v := fields[i+1]
		i++
		var err error
		switch k {
		case "via":
			r.Gateway, err = netip.ParseAddr(v)
		case "dev":
			r.Dev = v
		case "proto":
			r.Proto = v
		case "scope":
			r.Scope = v
		case "src":
			r.Src, err = netip.ParseAddr(v)
		case "metric":
			r.Metric, err = strconv.Atoi(v)
		case "pref":
		default:
			err = fmt.Errorf("unknown field %q", k)
		}
		if err != nil {
			return r, fmt.Errorf("route %q: %w", strings.Join(fields, " "), err)
		}
	}
	return r, nil
}
