package webconf

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/tune"
)

// Section is one section of an HAProxy configuration (global, defaults,
// frontend, backend, listen...) with its keyword lines.
type Section struct {
	Kind  string
	Name  string
	Head  *Directive
	Lines []*Directive
}

var haproxySections = map[string]bool{
	"global": true, "defaults": true, "frontend": true, "backend": true, "listen": true,
	"peers": true, "resolvers": true, "userlist": true, "mailers": true, "program": true,
	"http-errors": true, "ring": true, "cache": true, "fcgi-app": true,
}

// ParseHAProxy reads HAProxy's configuration files, in the order HAProxy
// reads them (each -f, a directory's files sorted), into sections.
func ParseHAProxy(files []File) []Section {
	var out []Section
	for _, f := range files {
		n := 0
		for line := range strings.Lines(f.Text) {
			n++
			words := haproxyWords(line)
			if len(words) == 0 {
				continue
			}
			d := &Directive{Name: words[0], Args: words[1:], File: f.Path, Line: n}
			if haproxySections[d.Name] {
				s := Section{Kind: d.Name, Head: d}
				if len(d.Args) > 0 {
					s.Name = d.Args[0]
				}
				out = append(out, s)
				continue
			}
			if len(out) > 0 {
				out[len(out)-1].Lines = append(out[len(out)-1].Lines, d)
			}
		}
	}
	return out
}

// haproxyWords splits a line as HAProxy does: blanks separate words, '#'
// starts a comment, quotes and a backslash keep what they hold in a word.
func haproxyWords(line string) []string {
	var words []string
	var w strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				w.WriteByte(c)
			}
		case c == '\\' && i+1 < len(line):
			i++
			w.WriteByte(line[i])
			in = true
		case c == '"' || c == '\'':
			quote, in = c, true
		case c == '#' && !in:
			i = len(line)
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

func findLine(ls []*Directive, name string) *Directive {
	for _, d := range ls {
		if d.Name == name {
			return d
		}
	}
	return nil
}

const haproxyDocs = "https://docs.haproxy.org/2.6/configuration.html#"

// HAProxyFindings holds HAProxy's configuration against its manual
// (configuration.txt of 2.6, the version Debian 12 ships); main is the
// first configuration file.
func HAProxyFindings(secs []Section, main string, h Host) []tune.Finding {
	c := &haproxyCheck{secs: secs, h: h, globalAt: main}
	for _, s := range secs {
		if s.Kind == "global" {
			c.global = append(c.global, s.Lines...)
			if c.globalAt == main {
				c.globalAt = s.Head.Where()
			}
		}
	}
	c.fileLimits()
	c.threads()
	c.buffers()
	c.keepAlive()
	return c.out
}

// haproxyCheck is one configuration being held against the rules.
type haproxyCheck struct {
	secs     []Section
	h        Host
	global   []*Directive // every global section's lines
	globalAt string       // where an unset global keyword would go
	out      []tune.Finding
}

func (c *haproxyCheck) add(f tune.Finding) { c.out = append(c.out, finding("haproxy", f)) }

func (c *haproxyCheck) where(d *Directive) string {
	if d != nil {
		return d.Where()
	}
	return c.globalAt
}

// fileLimits: maxconn, and ulimit-n, against the process's file limit.
func (c *haproxyCheck) fileLimits() {
	mc := findLine(c.global, "maxconn")
	maxconn := 0
	if mc != nil && len(mc.Args) == 1 {
		maxconn, _ = strconv.Atoi(mc.Args[0])
	}
	f := tune.Finding{Setting: "maxconn", Source: haproxyDocs + "3.2-maxconn", Where: c.where(mc), Recommended: "set, with the open-files limit above 2 x maxconn",
		Why: "the most connections the process holds; a proxied connection is two file descriptors, and HAProxy sizes its own file limit from maxconn when it may"}
	switch {
	case mc == nil:
		f.Current, f.Status = "unset (derived at start from the open-files limit)", tune.Change
		f.Why = "unset, it is derived from whatever file limit the service started with, so it moves with the unit's limits: " + f.Why
		if c.h.NoFile > 0 {
			f.Current = fmt.Sprintf("unset (about %d: derived from the open-files limit %d)", c.h.NoFile/2, c.h.NoFile)
		}
	case c.h.NoFile > 0 && c.h.NoFile < 2*int64(maxconn):
		f.Current, f.Status = mc.Args[0], tune.Far
		f.Why = fmt.Sprintf("the process's open-files limit %d is below 2 x maxconn %d: connections fail with EMFILE before maxconn is reached; %s", c.h.NoFile, maxconn, f.Why)
	default:
		f.Current = mc.Args[0]
	}
	c.add(f)

	// HAProxy raises its own limit to what maxconn needs, never lowers an
	// inherited one: the limit the process runs with is what counts.
	if ul := findLine(c.global, "ulimit-n"); ul != nil && len(ul.Args) == 1 {
		n, _ := strconv.ParseInt(ul.Args[0], 10, 64)
		f := tune.Finding{Setting: "ulimit-n", Current: ul.Args[0], Source: haproxyDocs + "3.1-ulimit-n", Where: ul.Where(),
			Recommended: "unset (HAProxy computes it from maxconn)", Status: tune.Change,
			Why: "the manual advises against setting it: HAProxy computes the file limit it needs from maxconn"}
		need := 2 * int64(maxconn)
		if c.h.NoFile > 0 {
			f.Why = fmt.Sprintf("the process runs with %d open files; %s", c.h.NoFile, f.Why)
			if maxconn > 0 && c.h.NoFile < need {
				f.Status = tune.Far
			}
		} else if maxconn > 0 && n < need {
			f.Status = tune.Far
			f.Why = fmt.Sprintf("ulimit-n %d is below 2 x maxconn %d; %s", n, maxconn, f.Why)
		}
		c.add(f)
	}
}

// threads: nbthread against the CPUs, and cpu-map.
func (c *haproxyCheck) threads() {
	nt := findLine(c.global, "nbthread")
	threads := c.h.CPUs
	f := tune.Finding{Setting: "nbthread", Current: "auto (one per CPU the process may use)", Source: haproxyDocs + "3.1-nbthread", Where: c.where(nt),
		Recommended: "unset (one thread per CPU)",
		Why:         "threads share the load of one process; by default HAProxy starts one per CPU it is allowed to run on"}
	if nt != nil && len(nt.Args) == 1 {
		f.Current = nt.Args[0]
		threads, _ = strconv.Atoi(nt.Args[0])
		if c.h.CPUs > 0 && threads != c.h.CPUs {
			f.Status = tune.Change
			f.Recommended = fmt.Sprintf("%d (the CPUs here), or unset", c.h.CPUs)
			f.Why = fmt.Sprintf("%d thread(s) on %d CPUs; %s", threads, c.h.CPUs, f.Why)
		}
	}
	c.add(f)

	cm := findLine(c.global, "cpu-map")
	f = tune.Finding{Setting: "cpu-map", Current: "unset", Source: haproxyDocs + "3.1-cpu-map", Where: c.where(cm),
		Recommended: "cpu-map auto:1/1-N 0-(N-1) when the CPUs are HAProxy's alone", Status: tune.Info,
		Why: "binds each thread to a CPU: worth it when the box serves nothing else and its NIC's queues are bound to the same CPUs"}
	if threads > 1 {
		f.Recommended = fmt.Sprintf("cpu-map auto:1/1-%d 0-%d when the CPUs are HAProxy's alone", threads, threads-1)
	}
	if cm != nil {
		f.Current, f.Recommended = strings.Join(cm.Args, " "), strings.Join(cm.Args, " ")
	}
	c.add(f)
}

// buffers: tune.bufsize.
func (c *haproxyCheck) buffers() {
	bs := findLine(c.global, "tune.bufsize")
	f := tune.Finding{Setting: "tune.bufsize", Current: "16384 (default)", Recommended: "16384", Source: haproxyDocs + "3.2-tune.bufsize", Where: c.where(bs),
		Why: "each stream holds up to two buffers of this size: smaller ones reject large headers (and move data in more system calls), larger ones cost memory per connection"}
	if bs != nil && len(bs.Args) == 1 {
		f.Current = bs.Args[0]
		if n, err := strconv.Atoi(bs.Args[0]); err != nil || n < 16384 {
			f.Status = tune.Change
		}
	}
	c.add(f)
}

// keepAlive to the servers: closing the server side after each response
// makes every request a new connection from this real server.
func (c *haproxyCheck) keepAlive() {
	for _, s := range c.secs {
		if s.Kind != "defaults" && s.Kind != "backend" && s.Kind != "listen" {
			continue
		}
		for _, d := range s.Lines {
			if d.Name == "option" && len(d.Args) > 0 && (d.Args[0] == "http-server-close" || d.Args[0] == "httpclose") {
				c.add(tune.Finding{Setting: fmt.Sprintf("%s %s: option %s", s.Kind, s.Name, d.Args[0]), Current: "option " + d.Args[0],
					Recommended: "option http-keep-alive (the default), with http-reuse safe", Status: tune.Change,
					Source: haproxyDocs + "4.2-option%20" + d.Args[0], Where: d.Where(),
					Why: "closes the connection to the server after each response: every request opens a new one (a handshake, a TIME_WAIT and an ephemeral port each) instead of reusing an idle one"})
			}
			if d.Name == "http-reuse" && len(d.Args) == 1 && d.Args[0] == "never" {
				c.add(tune.Finding{Setting: fmt.Sprintf("%s %s: http-reuse", s.Kind, s.Name), Current: "never", Recommended: "safe (the default)",
					Status: tune.Change, Source: haproxyDocs + "4.2-http-reuse", Where: d.Where(),
					Why: "never: idle server connections are not shared between clients, so each client opens its own"})
			}
		}
	}
}
