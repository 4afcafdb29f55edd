// Package formats reads and writes the desired state in the formats of the
// tools ipvsctl replaces: ipvsadm's save format, Piranha's lvs.cf,
// keepalived.conf (import only) and ipvsctl's own JSON document.
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
)

// maxDocument bounds what an importer reads: the largest real configuration
// (thousands of services) is a few MB.
const maxDocument = 64 << 20

// ParseError is malformed or invalid input: the format, the 1-based line the
// problem is on, and what is wrong.
type ParseError struct {
	Format string
	Line   int
	Msg    string
}

func (e *ParseError) Error() string {
	return e.Format + " line " + strconv.Itoa(e.Line) + ": " + e.Msg
}

// Formats lists the formats Import and Export take.
func Formats() (importable, exportable []string) {
	return []string{FormatJSON, FormatIpvsadm, FormatLVSCF, FormatKeepalived},
		[]string{FormatJSON, FormatIpvsadm, FormatLVSCF}
}

// Import reads a document in format (json | ipvsadm | lvs.cf | keepalived) into a State. Malformed input is a
// *ParseError naming the line (1-based) and what is wrong; the returned State is nil then. Keys with no
// equivalent in the model are kept in State.Imported (Source, Line, Scope, Key, Value), never dropped.
func Import(format string, r io.Reader) (*ipvsmgr.State, error) {
	var parse func([]byte) (*ipvsmgr.State, lineIndex, error)
	switch format {
	case FormatJSON:
		parse = parseJSON
	case FormatIpvsadm:
		parse = parseIpvsadm
	case FormatLVSCF:
		parse = parseLVSCF
	case FormatKeepalived:
		parse = parseKeepalived
	default:
		return nil, fmt.Errorf("import: unknown format %q (want json, ipvsadm, lvs.cf or keepalived)", format)
	}
	data, err := io.ReadAll(io.LimitReader(r, maxDocument+1))
	if err != nil {
		return nil, fmt.Errorf("import %s: read document: %w", format, err)
	}
	if len(data) > maxDocument {
		return nil, fmt.Errorf("import %s: document larger than %d bytes", format, maxDocument)
	}
	// The state is JSON, which has no room for invalid UTF-8 (an old
	// Latin-1 comment); encoding/json would replace it anyway, later.
	data = bytes.ToValidUTF8(data, []byte("\uFFFD"))
	st, lines, err := parse(data)
	if err != nil {
		return nil, err
	}
	if err := checkState(format, st, lines); err != nil {
		return nil, err
	}
	return st, nil
}

// Export writes st in format (json | ipvsadm | lvs.cf).
func Export(format string, st *ipvsmgr.State, w io.Writer) error {
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
	default:
		return fmt.Errorf("export: unknown format %q (want json, ipvsadm or lvs.cf)", format)
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
func checkState(format string, st *ipvsmgr.State, lines lineIndex) error {
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
		fmt.Fprintf(&msg, "; line %d: %s", lines.lineOf(p.Field), p.Error())
	}
	return &ParseError{Format: format, Line: lines.lineOf(first.Field), Msg: msg.String()}
}

func boolPtr(b bool) *bool { return &b }
func intPtr(n int) *int    { return &n }
