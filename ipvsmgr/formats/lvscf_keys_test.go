package formats

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A key Piranha's reader does not know is refused at its line, as lvsd
// refuses it ("unknown command"); --ignore-unknown lists each one and goes
// on, keeping none of them.
func TestLVSCFUnknownKeys(t *testing.T) {
	doc := `serial_no = 3
netwrok = direct
virtual web {
     address = 198.18.0.100 eth0:1
     port = 80
     schedular = rr
     server a {
         address = 198.18.1.11
         weigth = 2
     }
}
`
	_, _, err := ImportWith(FormatLVSCF, strings.NewReader(doc), Options{})
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 2 || !strings.Contains(pe.Msg, `unknown command "netwrok" at the top level`) || !strings.Contains(pe.Msg, "--ignore-unknown") {
		t.Fatalf("want the top-level typo refused at line 2, got %v", err)
	}
	for _, c := range []struct {
		doc  string
		line int
		msg  string
	}{
		{strings.Replace(doc, "netwrok", "network", 1), 6, `unknown command "schedular" in virtual web`},
		{strings.NewReplacer("netwrok", "network", "schedular", "scheduler").Replace(doc), 9, `unknown command "weigth" in virtual web server a`},
	} {
		_, _, err := ImportWith(FormatLVSCF, strings.NewReader(c.doc), Options{})
		if !errors.As(err, &pe) || pe.Line != c.line || !strings.Contains(pe.Msg, c.msg) {
			t.Errorf("want %q at line %d, got %v", c.msg, c.line, err)
		}
	}
	st, rep, err := ImportWith(FormatLVSCF, strings.NewReader(doc), Options{IgnoreUnknown: true})
	if err != nil {
		t.Fatalf("--ignore-unknown: %v", err)
	}
	var got []string
	for _, n := range rep.Ignored {
		got = append(got, n.String())
	}
	want := []string{
		`line 2: unknown command "netwrok" at the top level (Piranha's lvs.cf reader refuses it)`,
		`line 6: unknown command "schedular" in virtual web (Piranha's lvs.cf reader refuses it)`,
		`line 9: unknown command "weigth" in virtual web server a (Piranha's lvs.cf reader refuses it)`,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ignored (-want +got):\n%s", d)
	}
	for _, k := range st.Imported {
		if k.Key == "netwrok" || k.Key == "schedular" || k.Key == "weigth" {
			t.Errorf("an unknown key was kept: %+v", k)
		}
	}
	if rep.Summary() != "1 virtual services, 1 real servers, 2 kept" || st.Services[0].Scheduler != "" || st.Services[0].Servers[0].Weight != nil {
		t.Errorf("report %q, service %+v", rep.Summary(), st.Services[0])
	}
	// Every key Piranha knows is still read: start_cmd, dirs and the like
	// are kept, not refused.
	known := "serial_no = 1\nhard_shutdown = 1\nipvsadm = /sbin/ipvsadm\nsync = 0\nprimary_shared = /dev/sda1\n" +
		"virtual v {\n address = 198.18.0.1 eth0\n port = 80\n client_monitor = /usr/sbin/nanny\n master = 198.18.0.2\n dirs = [ /a /b ]\n" +
		" server s {\n  address = 198.18.1.1\n  active = 1\n  weight = 1\n  port = 80\n }\n}\n"
	if _, _, err := ImportWith(FormatLVSCF, strings.NewReader(known), Options{}); err != nil {
		t.Errorf("Piranha's own keys: %v", err)
	}
}
