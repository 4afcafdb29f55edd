// Package formats reads and writes the desired state in the formats of the
// tools ipvsctl replaces: ipvsadm's save format, Piranha's lvs.cf,
// keepalived.conf, ldirectord.cf and ipvsctl's own JSON document.
//
// Importers map what the model can hold and keep everything else in
// State.Imported with its line and scope, so nothing is silently dropped. An
// importer's result has passed ipvsmgr.Compile; a problem is a *ParseError
// naming the line it comes from.
package formats

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// Format names as the CLI's --format flag spells them.
const (
	FormatJSON       = "json"
	FormatIpvsadm    = "ipvsadm"
	FormatLVSCF      = "lvs.cf"
	FormatKeepalived = "keepalived"
	FormatLdirectord = "ldirectord"
)

// maxDocument bounds what an importer reads: the largest real configuration
// (thousands of services) is a few MB.
const maxDocument = 64 << 20

// ParseError is malformed or invalid input: the format, the 1-based line the
// problem is on, and what is wrong.
type ParseError struct {
	Format string
	File   string // an included file; "" the document itself
	Line   int
	Msg    string
}

func (e *ParseError) Error() string {
	if e.File != "" {
		return e.Format + " " + e.File + " line " + strconv.Itoa(e.Line) + ": " + e.Msg
	}
	return e.Format + " line " + strconv.Itoa(e.Line) + ": " + e.Msg
}

// Formats lists the formats Import and Export take.
func Formats() (importable, exportable []string) {
	return []string{FormatJSON, FormatIpvsadm, FormatLVSCF, FormatKeepalived, FormatLdirectord},
		[]string{FormatJSON, FormatIpvsadm, FormatLVSCF, FormatKeepalived, FormatLdirectord}
}

// Options change how an import reads its input.
type Options struct {
	// IgnoreUnknown goes on past keywords the format's own tool does not
	// know (each is listed in Report.Ignored); by default one is an error.
	IgnoreUnknown bool
	// Path is where the document was read from: keepalived resolves a
	// relative include from the directory of the file that holds it.
	Path string
	// ReadFile and Glob read included files (keepalived's include); nil
	// refuses an include by its line, since the files are not at hand.
	ReadFile func(name string) ([]byte, error)
	Glob     func(pattern string) ([]string, error)
	// ServicesFile reads the service names of ports (nil: /etc/services).
	ServicesFile func() ([]byte, error)
	// ConfigID is keepalived's configuration id (its -i, --config-id):
	// which `@ID` lines are read, and ${_INSTANCE}. Empty: the host's name up
	// to its first dot, as keepalived's default.
	ConfigID string
	// LookupHost resolves a host name where the format takes one
	// (ldirectord's real=, virtual=, fallback=); nil: net.LookupHost.
	LookupHost func(host string) ([]string, error)
}

// Note is one line of an import's report: a fix the format's tool makes
// with a warning (ipvsctl makes the same one), or an unknown keyword passed
// over under Options.IgnoreUnknown.
type Note struct {
	File string `json:"file,omitempty"` // an included file; "" the document itself
	Line int    `json:"line"`
	Msg  string `json:"message"`
}

func (n Note) String() string {
	if n.File != "" {
		return fmt.Sprintf("%s line %d: %s", n.File, n.Line, n.Msg)
	}
	return fmt.Sprintf("line %d: %s", n.Line, n.Msg)
}

// Report is what an import read: the virtual services and real servers it
// stores, how many entries it kept in State.Imported, and its notes.
type Report struct {
	Services int    `json:"services"`
	Servers  int    `json:"servers"`
	Kept     int    `json:"kept"`
	Warnings []Note `json:"warnings"`
	Ignored  []Note `json:"ignored"`
	// Node is what the import says of this director's own settings (a
	// keepalived vrrp_instance's priority), nil when nothing.
	Node *NodeHint `json:"node,omitempty"`
	// declared counts the services and servers the source declares, less
	// those dropped with a warning, as the importer met them.
	declaredServices, declaredServers int
}

// Summary is the report's one line: "N virtual services, M real servers, K kept".
func (r *Report) Summary() string {
	return fmt.Sprintf("%d virtual services, %d real servers, %d kept", r.Services, r.Servers, r.Kept)
}

// importer is what every format's parser shares: the options and the report
// it adds to.
type importer struct {
	format string
	opts   Options
	rep    *Report
	// files maps an included file's line base (line >> fileShift) to its
	// name; see lineRef.
	files []string
	// services maps "tcp/http" to 80, read on first use.
	services map[string]int
}

// Lines of included files are numbered from their file's base upwards
// (base = index << fileShift), so that one int names a file and a line.
const fileShift = 24

func (im *importer) lineRef(line int) (string, int) {
	i := line >> fileShift
	if i <= 0 || i >= len(im.files) {
		return "", line
	}
	return im.files[i], line & (1<<fileShift - 1)
}

// warnf notes a fix the format's tool makes with a warning.
func (im *importer) warnf(line int, format string, args ...any) {
	f, l := im.lineRef(line)
	im.rep.Warnings = append(im.rep.Warnings, Note{File: f, Line: l, Msg: fmt.Sprintf(format, args...)})
}

// unknown is a keyword the format's tool does not know: an error, or with
// IgnoreUnknown a note.
func (im *importer) unknown(line int, format string, args ...any) error {
	if !im.opts.IgnoreUnknown {
		return &ParseError{Format: im.format, Line: line, Msg: fmt.Sprintf(format, args...) + " (--ignore-unknown passes over it)"}
	}
	f, l := im.lineRef(line)
	im.rep.Ignored = append(im.rep.Ignored, Note{File: f, Line: l, Msg: fmt.Sprintf(format, args...)})
	return nil
}

// declare counts what the source declares; dropped ones are subtracted by
// the warning that drops them.
func (im *importer) declare(services, servers int) {
	im.rep.declaredServices += services
	im.rep.declaredServers += servers
}

// Import reads a document in format (json | ipvsadm | lvs.cf | keepalived | ldirectord) into a State. Malformed input is a
// *ParseError naming the line (1-based) and what is wrong; the returned State is nil then. Keys with no
// equivalent in the model are kept in State.Imported (Source, Line, Scope, Key, Value), never dropped.
func Import(format string, r io.Reader) (*ipvsmgr.State, error) {
	st, _, err := ImportWith(format, r, Options{})
	return st, err
}

// ImportWith is Import with options, and the report of what was read. A
// result with fewer virtual services or real servers than the source
// declares (less those its tool drops with a warning) is an error: nothing
// is lost silently.
func ImportWith(format string, r io.Reader, o Options) (*ipvsmgr.State, *Report, error) {
	var parse func([]byte, *importer) (*ipvsmgr.State, lineIndex, error)
	switch format {
	case FormatJSON:
		parse = parseJSON
	case FormatIpvsadm:
		parse = parseIpvsadm
	case FormatLVSCF:
		parse = parseLVSCF
	case FormatKeepalived:
		parse = parseKeepalived
	case FormatLdirectord:
		parse = parseLdirectord
	default:
		return nil, nil, fmt.Errorf("import: unknown format %q (want json, ipvsadm, lvs.cf, keepalived or ldirectord)", format)
	}
	data, err := readDocument(format, r)
	if err != nil {
		return nil, nil, err
	}
	im := &importer{format: format, opts: o, rep: &Report{Warnings: []Note{}, Ignored: []Note{}}, files: []string{""}}
	st, lines, err := parse(data, im)
	if err == nil {
		err = checkState(format, st, lines, im.lineRef)
	}
	if err == nil {
		err = im.checkCounts(st)
	}
	if err != nil {
		var pe *ParseError
		if errors.As(err, &pe) {
			pe.File, pe.Line = im.lineRef(pe.Line)
		}
		return nil, nil, err
	}
	for i := range st.Imported {
		if f, l := im.lineRef(st.Imported[i].Line); f != "" {
			st.Imported[i].Line = l
			st.Imported[i].Scope = strings.TrimSpace("in " + f + " " + st.Imported[i].Scope)
		}
	}
	ipvsmgr.ScrubImported(st.Imported) // a secret another tool's file holds is not kept (ipvsmgr/secrets.go)
	im.rep.Services, im.rep.Kept = len(st.Services), len(st.Imported)
	for _, svc := range st.Services {
		im.rep.Servers += len(svc.Servers)
	}
	return st, im.rep, nil
}

func readDocument(format string, r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxDocument+1))
	if err != nil {
		return nil, fmt.Errorf("import %s: read document: %w", format, err)
	}
	if len(data) > maxDocument {
		return nil, fmt.Errorf("import %s: document larger than %d bytes", format, maxDocument)
	}
	// The state is JSON, which has no room for invalid UTF-8 (an old
	// Latin-1 comment); encoding/json would replace it anyway, later.
	return bytes.ToValidUTF8(data, []byte("\uFFFD")), nil
}

// checkCounts refuses a state that holds fewer services or servers than
// the source declared.
func (im *importer) checkCounts(st *ipvsmgr.State) error {
	servers := 0
	for _, svc := range st.Services {
		servers += len(svc.Servers)
	}
	if len(st.Services) < im.rep.declaredServices || servers < im.rep.declaredServers {
		return fmt.Errorf("import %s: the result has %d virtual services and %d real servers, the source declares %d and %d: refusing to lose any",
			im.format, len(st.Services), servers, im.rep.declaredServices, im.rep.declaredServers)
	}
	return nil
}

// CheckReplace refuses to replace a state that has virtual services with
// one that has none, unless allowEmpty: an empty import is more often a
// file ipvsctl could not read than a wish to stop every service.
func CheckReplace(current, next *ipvsmgr.State, allowEmpty bool) error {
	if allowEmpty || current == nil || len(current.Services) == 0 || len(next.Services) > 0 {
		return nil
	}
	return fmt.Errorf("the import has no virtual services and would remove all %d stored ones (--allow-empty to do that)", len(current.Services))
}

// ExportOptions are what an export says beside the document: this
// director's own node settings (a keepalived vrrp_instance's priority).
type ExportOptions struct {
	Node *NodeHint
}

// Export writes st in format (json | ipvsadm | lvs.cf | keepalived | ldirectord).
func Export(format string, st *ipvsmgr.State, w io.Writer) error {
	return ExportWith(format, st, w, ExportOptions{})
}

// ExportWith is Export with the node's settings.
func ExportWith(format string, st *ipvsmgr.State, w io.Writer, o ExportOptions) error {
	if st == nil {
		return errors.New("export: no state")
	}
	var err error
	switch format {
	case FormatJSON:
		err = st.Encode(w)
	case FormatIpvsadm:
		err = exportIpvsadm(st, w)
	case FormatLVSCF:
		err = exportLVSCF(st, w)
	case FormatKeepalived:
		err = exportKeepalived(st, w, o)
	case FormatLdirectord:
		err = exportLdirectord(st, w)
	default:
		return fmt.Errorf("export: unknown format %q (want json, ipvsadm, lvs.cf, keepalived or ldirectord)", format)
	}
	if err != nil {
		return fmt.Errorf("export %s: %w", format, err)
	}
	return nil
}

// lineIndex maps a field path of the document ("services[2]",
// "services[2].servers[0]", "settings.network") to the input line it came
// from, so that a validation problem can name a line.
type lineIndex map[string]int

func (li lineIndex) lineOf(field string) int {
	for f := field; f != ""; {
		if n, ok := li[f]; ok {
			return n
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			break
		}
		f = f[:i]
	}
	if n, ok := li[""]; ok {
		return n
	}
	return 1
}

// checkState validates an imported state and reports every problem at the
// line of the entry it is about.
func checkState(format string, st *ipvsmgr.State, lines lineIndex, ref func(int) (string, int)) error {
	_, err := ipvsmgr.Compile(st)
	if err == nil {
		return nil
	}
	var ve *ipvsmgr.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) == 0 {
		return fmt.Errorf("import %s: validate: %w", format, err)
	}
	first := ve.Problems[0]
	var msg strings.Builder
	msg.WriteString(first.Error())
	for _, p := range ve.Problems[1:] {
		if f, l := ref(lines.lineOf(p.Field)); f != "" {
			fmt.Fprintf(&msg, "; %s line %d: %s", f, l, p.Error())
		} else {
			fmt.Fprintf(&msg, "; line %d: %s", l, p.Error())
		}
	}
	return &ParseError{Format: format, Line: lines.lineOf(first.Field), Msg: msg.String()}
}

func boolPtr(b bool) *bool { return &b }
func intPtr(n int) *int    { return &n }
