package formats

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// PING_CHECK becomes a ping check with keepalived's timing; FILE_CHECK a
// file check on its track_file's file, with the checker's weight or, when
// it has none, the track_file's; a FILE_CHECK with no track_file is dropped
// with keepalived's warning; both export back and import again the same.
func TestKeepalivedPingAndFileChecks(t *testing.T) {
	doc := `track_file weights {
    file /run/lb/weights
    weight 3 reverse
}
track_file flag {
    file /run/lb/flag
    weight 0
}
virtual_server 198.18.0.1 80 {
    lb_algo rr
    lb_kind DR
    protocol TCP
    real_server 198.18.1.1 80 {
        PING_CHECK {
            delay_loop 3
            connect_timeout 1
            retry 2
            warmup 0
        }
    }
    real_server 198.18.1.2 80 {
        FILE_CHECK {
            track_file weights
        }
    }
    real_server 198.18.1.3 80 {
        FILE_CHECK {
            track_file weights
            weight -2
        }
    }
    real_server 198.18.1.4 80 {
        FILE_CHECK {
            track_file nowhere
        }
    }
}
`
	st, rep, err := ImportWith(FormatKeepalived, strings.NewReader(doc), Options{})
	if err != nil {
		t.Fatal(err)
	}
	yes := boolPtr(true)
	want := []*ipvsmgr.Check{
		{Type: "ping", Interval: 3, Timeout: 1, Rise: 1, Fall: 3, StartHealthy: yes, Warmup: new(float64)},
		{Type: "file", File: "/run/lb/weights", FileWeight: intPtr(3), FileReverse: yes, Interval: 1, Rise: 1, Fall: 1, StartHealthy: yes},
		{Type: "file", File: "/run/lb/weights", FileWeight: intPtr(-2), Interval: 1, Rise: 1, Fall: 1, StartHealthy: yes},
		nil,
	}
	var got []*ipvsmgr.Check
	for _, rs := range st.Services[0].Servers {
		got = append(got, rs.Check)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("checks (-want +got):\n%s", d)
	}
	var warnings []string
	for _, n := range rep.Warnings {
		warnings = append(warnings, n.String())
	}
	if !cmp.Equal(warnings[len(warnings)-2:], []string{"line 34: track_file nowhere not found", "line 33: FILE_CHECK has no track_file specified - ignoring"}) {
		t.Errorf("warnings: %q", warnings)
	}
	roundTrip(t, FormatKeepalived, st)

	// A relative track file is refused at its line: ipvsctl does not run
	// in keepalived's directory.
	_, _, err = ImportWith(FormatKeepalived, strings.NewReader(strings.Replace(doc, "/run/lb/weights", "weights.txt", 1)), Options{})
	if err == nil || !strings.Contains(err.Error(), `line 2: track_file weights: file "weights.txt": want an absolute path`) {
		t.Errorf("relative track file: %v", err)
	}
	// A keyword FILE_CHECK does not know is one.
	_, _, err = ImportWith(FormatKeepalived, strings.NewReader(strings.Replace(doc, "weight -2", "delay_loop 2", 1)), Options{})
	if err == nil || !strings.Contains(err.Error(), `unknown keyword "delay_loop"`) {
		t.Errorf("delay_loop in FILE_CHECK: %v", err)
	}
}
