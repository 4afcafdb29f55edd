package ipvsmgr

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
)

// Check is a health check as the document writes it. On a service it is what
// the service's real servers inherit; on a server, each field it sets
// overrides the service's. A zero or absent field is "not set": the server
// inherits it, and a field nobody sets takes its default (CheckDefaults).
type Check struct {
	// Type is tcp, http, https, send_expect, dns, exec, agent, smtp, ping,
	// file, one of ldirectord's negotiate checks (mysql, pgsql, ldap, ldaps,
	// imap, imaps, pop, pops, ftp, radius, sip, nntp) or none.
	Type string `json:"type,omitempty"`
	// Interval and Timeout are seconds (fractions allowed, down to 0.1).
	Interval float64 `json:"interval,omitempty"`
	Timeout  float64 `json:"timeout,omitempty"`
	// FastInterval is the interval while a server is changing state: after
	// a failure while it is still in, after a pass while it is still out
	// (HAProxy's fastinter; keepalived's delay_before_retry). DownInterval
	// is the interval while it is out (HAProxy's downinter). Seconds, 0:
	// Interval.
	FastInterval float64 `json:"fast_interval,omitempty"`
	DownInterval float64 `json:"down_interval,omitempty"`
	// Rise consecutive passes bring a server back, Fall consecutive failures
	// take it out.
	Rise int `json:"rise,omitempty"`
	Fall int `json:"fall,omitempty"`
	// Address and Port check somewhere else than the real server's own
	// address and port (for an agent check, Port is the agent's).
	Address string `json:"address,omitempty"`
	Port    int    `json:"port,omitempty"`
	// OnFailure is quiesce (weight 0 in the kernel) or remove (out of it).
	OnFailure string `json:"on_failure,omitempty"`
	// SlowStart seconds: a server coming back ramps up to its weight.
	SlowStart *float64 `json:"slow_start,omitempty"`
	// StartHealthy puts a newly added server in before its first pass.
	StartHealthy *bool `json:"start_healthy,omitempty"`
	// ConnectChecks (ldirectord's checktype = N) makes N of every N+1
	// runs a tcp connect to the same target instead of the full check:
	// a full check, and after it passes N connects, then a full check
	// again; a failed connect makes the next run a full check.
	ConnectChecks int `json:"connect_checks,omitempty"`
	// Warmup bounds the random delay before a new server's first check
	// (keepalived's warmup), seconds: absent, the interval; 0, at once.
	Warmup *float64 `json:"warmup,omitempty"`

	// http and https.
	Method       string `json:"method,omitempty"`
	Path         string `json:"path,omitempty"`
	Host         string `json:"host,omitempty"`
	ExpectStatus []int  `json:"expect_status,omitempty"`
	ExpectBody   string `json:"expect_body,omitempty"` // a regular expression
	TLSVerify    *bool  `json:"tls_verify,omitempty"`
	SNI          string `json:"sni,omitempty"`

	// send_expect (Piranha's send/expect): Send with \r \n \t escapes, Expect
	// a prefix of the reply ("*" for any reply) or, with UseRegex, a regular
	// expression; over Protocol tcp (default) or udp.
	Send     string `json:"send,omitempty"`
	Expect   string `json:"expect,omitempty"`
	UseRegex *bool  `json:"use_regex,omitempty"`
	Protocol string `json:"protocol,omitempty"`

	// dns: query Name of QType (default A); pass on an answer, or, with RCode,
	// on that response code. smtp (keepalived's SMTP_CHECK): a 220 greeting,
	// then 250 to HELO Name (default localhost).
	Name  string `json:"name,omitempty"`
	QType string `json:"qtype,omitempty"`
	RCode string `json:"rcode,omitempty"`

	// exec: Command is the program and its arguments (a string is split into
	// them; never run through a shell), %h and %p replaced by the target's
	// address and port. Exit 0 passes. With DynamicWeight, an exit status of
	// 2..255 passes and sets the weight to status-2 (keepalived's
	// misc_dynamic). With Expect (Piranha's send_program with expect), the
	// program must also print it: its output less the last character (the
	// newline) equal to Expect, or matching it as a regular expression with
	// UseRegex ("*": any output).
	Command       Argv  `json:"command,omitempty"`
	DynamicWeight *bool `json:"dynamic_weight,omitempty"`

	// ping (keepalived's PING_CHECK): an ICMP echo to the server (or
	// Address), passing on the reply.

	// file (keepalived's FILE_CHECK with its track_file): File holds a
	// number, read each interval; FileWeight (default 1, -65535..65535)
	// multiplies it, negated with FileReverse. With FileWeight 0 a non-zero
	// number is down (zero with FileReverse); else a product of -65535 or
	// less is down and any other is added to the server's weight.
	File        string `json:"file,omitempty"`
	FileWeight  *int   `json:"file_weight,omitempty"`
	FileReverse *bool  `json:"file_reverse,omitempty"`

	// ldirectord's negotiate checks (mysql pgsql ldap ldaps imap imaps pop
	// pops ftp radius sip), with its words: Request is what to ask (the SQL
	// query, the LDAP search base, the file to RETR, the SIP request URI),
	// Receive a regular expression the answer must match. Login, Database
	// as ldirectord's login and database. The password and the RADIUS
	// secret never go in the document (every viewer reads it): they are in
	// the files PasswordFile and SecretFile, read by the director at each
	// run.
	Request      string `json:"request,omitempty"`
	Receive      string `json:"receive,omitempty"`
	Login        string `json:"login,omitempty"`
	PasswordFile string `json:"password_file,omitempty"`
	Database     string `json:"database,omitempty"`
	SecretFile   string `json:"secret_file,omitempty"`
}

// CheckTypes lists the check types.
func CheckTypes() []string {
	return []string{"tcp", "http", "https", "send_expect", "dns", "exec", "agent", "smtp", "ping", "file",
		"mysql", "pgsql", "ldap", "ldaps", "imap", "imaps", "pop", "pops", "ftp", "radius", "sip", "nntp", "none"}
}

// NegotiateTypes lists the check types that speak one of ldirectord's
// negotiate protocols, with its request, receive, login and password
// (nntp, which reads a greeting and takes none of them, is not one).
func NegotiateTypes() []string {
	return []string{"mysql", "pgsql", "ldap", "ldaps", "imap", "imaps", "pop", "pops", "ftp", "radius", "sip"}
}

// Check defaults, for what neither a service's nor a server's check sets.
const (
	DefaultCheckInterval = 2.0 // seconds
	DefaultCheckTimeout  = 1.0 // seconds
	DefaultCheckRise     = 2
	DefaultCheckFall     = 3
	DefaultOnFailure     = "remove"
)

// Argv is a command and its arguments. In a document it is a list of strings,
// or one string split into words at white space (single and double quotes
// and backslashes group and escape, as a shell would, but no shell runs).
type Argv []string

// UnmarshalJSON takes a list of strings or a command line.
func (a *Argv) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var line string
		if err := json.Unmarshal(b, &line); err != nil {
			return err
		}
		words, err := SplitCommand(line)
		if err != nil {
			return err
		}
		*a = words
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return err
	}
	*a = list
	return nil
}

// SplitCommand splits a command line into words: white space separates them,
// '...' keeps everything literally, "..." and a backslash escape.
func SplitCommand(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	escaped := false
	for _, r := range line {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\\':
			escaped, inWord = true, true
		case quote == '"':
			if r == '"' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case unicode.IsSpace(r):
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("command %q: unterminated %c quote", line, quote)
	}
	if escaped {
		return nil, fmt.Errorf("command %q ends with a backslash", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// merged returns the service's check with the server's fields laid over it.
func mergeChecks(svc, srv *Check) Check {
	var out Check
	if svc != nil {
		out = *svc
	}
	if srv == nil {
		return out
	}
	overlay(&out.Type, srv.Type)
	overlay(&out.Interval, srv.Interval)
	overlay(&out.Timeout, srv.Timeout)
	overlay(&out.FastInterval, srv.FastInterval)
	overlay(&out.DownInterval, srv.DownInterval)
	overlay(&out.Rise, srv.Rise)
	overlay(&out.Fall, srv.Fall)
	overlay(&out.Address, srv.Address)
	overlay(&out.Port, srv.Port)
	overlay(&out.OnFailure, srv.OnFailure)
	overlay(&out.SlowStart, srv.SlowStart)
	overlay(&out.StartHealthy, srv.StartHealthy)
	overlay(&out.Warmup, srv.Warmup)
	overlay(&out.ConnectChecks, srv.ConnectChecks)
	overlay(&out.Method, srv.Method)
	overlay(&out.Path, srv.Path)
	overlay(&out.Host, srv.Host)
	if srv.ExpectStatus != nil {
		out.ExpectStatus = srv.ExpectStatus
	}
	overlay(&out.ExpectBody, srv.ExpectBody)
	overlay(&out.TLSVerify, srv.TLSVerify)
	overlay(&out.SNI, srv.SNI)
	overlay(&out.Send, srv.Send)
	overlay(&out.Expect, srv.Expect)
	overlay(&out.UseRegex, srv.UseRegex)
	overlay(&out.Protocol, srv.Protocol)
	overlay(&out.Name, srv.Name)
	overlay(&out.QType, srv.QType)
	overlay(&out.RCode, srv.RCode)
	if srv.Command != nil {
		out.Command = srv.Command
	}
	overlay(&out.DynamicWeight, srv.DynamicWeight)
	overlay(&out.File, srv.File)
	overlay(&out.FileWeight, srv.FileWeight)
	overlay(&out.FileReverse, srv.FileReverse)
	overlay(&out.Request, srv.Request)
	overlay(&out.Receive, srv.Receive)
	overlay(&out.Login, srv.Login)
	overlay(&out.PasswordFile, srv.PasswordFile)
	overlay(&out.Database, srv.Database)
	overlay(&out.SecretFile, srv.SecretFile)
	return out
}

// overlay sets *dst to v unless v is its type's zero: a field the server's
// check leaves out is the service's.
func overlay[T comparable](dst *T, v T) {
	var zero T
	if v != zero {
		*dst = v
	}
}

// DecodeEscapes decodes Piranha's escapes in a send or expect string: \r \n
// \t and \\ (any other backslash is kept as it is).
func DecodeEscapes(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case 'r':
			b.WriteByte('\r')
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case '\\':
			b.WriteByte('\\')
		default:
			b.WriteByte('\\')
			continue
		}
		i++
	}
	return b.String()
}

// EncodeEscapes is the inverse of DecodeEscapes, for writing lvs.cf.
func EncodeEscapes(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "\r", `\r`, "\n", `\n`, "\t", `\t`)
	return r.Replace(s)
}

// MergedCheck is the check a server runs: the service's with the server's
// fields laid over it.
func MergedCheck(svc, srv *Check) Check { return mergeChecks(svc, srv) }
