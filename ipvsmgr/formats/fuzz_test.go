package formats

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// Each fuzz target feeds an importer arbitrary bytes: it must not panic, an
// error must come with a nil state, and a state it returns must compile and
// survive an export and a re-import.

func seed(f *testing.F, dir string, extra ...string) {
	f.Helper()
	paths, _ := filepath.Glob(filepath.Join("testdata", dir, "*"))
	corpus, _ := filepath.Glob(filepath.Join("testdata", "corpus", dir, "*"))
	paths = append(paths, corpus...)
	for _, p := range paths {
		if strings.HasSuffix(p, ".golden.json") || strings.HasSuffix(p, ".md") || strings.HasSuffix(p, ".pl") || strings.HasSuffix(p, ".report") ||
			strings.HasSuffix(p, ".error") || filepath.Base(p) == "root" {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range extra {
		f.Add([]byte(s))
	}
}

// fuzzImport imports data; it fails on a panic (by not recovering), on an
// error paired with a state, and on a state that does not compile.
func fuzzImport(t *testing.T, format string, data []byte) *ipvsmgr.State {
	st, _, err := ImportWith(format, bytes.NewReader(data), Options{LookupHost: noDNS})
	if err != nil {
		if st != nil {
			t.Fatalf("error %v came with a state", err)
		}
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Fatalf("error is not a *ParseError: %v", err)
		}
		if pe.Line < 1 {
			t.Fatalf("error names line %d: %v", pe.Line, err)
		}
		return nil
	}
	if _, err := ipvsmgr.Compile(st); err != nil {
		t.Fatalf("imported state does not compile: %v", err)
	}
	return st
}

// noDNS resolves localhost alone: the fuzzer's host names (lvs.cf's and
// ldirectord's addresses take them) would each wait for the resolver, seconds
// without a network, and a worker stalled past 10 s is taken for a hang.
func noDNS(h string) ([]string, error) {
	if h == "localhost" {
		return []string{"127.0.0.1", "::1"}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: h, IsNotFound: true}
}

// reexport checks that exporting st to format and importing that gives a
// document that exports to the same bytes again.
func reexport(t *testing.T, format string, st *ipvsmgr.State) {
	var first bytes.Buffer
	if err := Export(format, st, &first); err != nil {
		return // a state the format cannot express is an error, not a crash
	}
	back, err := Import(format, bytes.NewReader(first.Bytes()))
	if err != nil {
		t.Fatalf("re-import of the %s export: %v\n%s", format, err, first.String())
	}
	var second bytes.Buffer
	if err := Export(format, back, &second); err != nil {
		t.Fatalf("second export: %v", err)
	}
	if d := cmp.Diff(first.String(), second.String()); d != "" {
		t.Fatalf("export is not stable (-first +second):\n%s", d)
	}
}

func FuzzImportIpvsadm(f *testing.F) {
	seed(f, "ipvsadm", "-A -f 7 -6 -s rr\n", "--set 900 120 300\n-C\n",
		"-A -u 198.18.0.5:5060 -s rr -p 30 --pe sip\n-a -u 198.18.0.5:5060 -r 198.18.2.11:5060 -i -w 1 --tun-type gue --tun-port 6080 --tun-nocsum\n")
	f.Fuzz(func(t *testing.T, data []byte) {
		st := fuzzImport(t, FormatIpvsadm, data)
		if st == nil {
			return
		}
		reexport(t, FormatIpvsadm, st)
		reexport(t, FormatJSON, st)
	})
}

func FuzzImportJSON(f *testing.F) {
	seed(f, "json", `{"services":[{"fwmark":5,"address":"198.18.0.101","interface":"eth0","scheduler":"mh","scheduler_flags":["port"],"match":[{"protocol":"tcp","ports":[80,443]}],"servers":[{"address":"198.18.0.11"}]}]}`)
	f.Fuzz(func(t *testing.T, data []byte) {
		st := fuzzImport(t, FormatJSON, data)
		if st == nil {
			return
		}
		var out bytes.Buffer
		if err := Export(FormatJSON, st, &out); err != nil {
			t.Fatal(err)
		}
		back, err := Import(FormatJSON, &out)
		if err != nil {
			t.Fatalf("re-import: %v", err)
		}
		if d := cmp.Diff(st, back, cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("JSON round trip:\n%s", d)
		}
		reexport(t, FormatIpvsadm, st)
	})
}

func FuzzImportLVSCF(f *testing.F) {
	seed(f, "lvs.cf", "virtual web\n{\naddress = 198.18.0.1\nport = 80\nserver a\n{\naddress = 198.18.0.2\n}\n}\n")
	f.Fuzz(func(t *testing.T, data []byte) {
		st := fuzzImport(t, FormatLVSCF, data)
		if st == nil {
			return
		}
		reexport(t, FormatLVSCF, st)
		reexport(t, FormatIpvsadm, st)
	})
}

func FuzzImportKeepalived(f *testing.F) {
	seed(f, "keepalived", "virtual_server 198.18.0.1 80\n{\n lb_kind DR\n real_server 198.18.0.2 80 { weight 2 }\n}\n", "a {\n\"b\" }\n! c\n",
		"virtual_server fwmark 3 {\n delay_loop 1\n sorry_server 198.18.0.9 81\n quorum 3\n real_server 198.18.0.2 80 { weight 2\n TCP_CHECK { connect_port 81 retry 0 } }\n}\n",
		"virtual_server 198.18.0.1 53 {\n protocol UDP\n real_server 198.18.0.2 53 { UDP_CHECK { payload 6869 require_reply 6869 } DNS_CHECK { type MX name . } }\n}\n",
		"virtual_server 198.18.0.1 80 {\n alpha\n real_server 198.18.0.2 80 { MISC_CHECK { misc_path \"/bin/x %h\" misc_dynamic misc_timeout 2 } HTTP_GET { url { path / status_code 200-202 } } }\n}\n",
		"virtual_server 198.18.0.1 80 {\n quorum_up \"/bin/n up 'a b'\"\n quorum_down /bin/n\n real_server 198.18.0.2 80 { TCP_CHECK { } }\n}\n",
		"$V=198.18.0.1\n$RS=real_server ${V} 80 { \\\n weight $W \\\n}\n@a $W=2\n@^a $W=3\nvirtual_server $V 80 {\n sorry_server 198.18.0.1 80\n $RS\n}\nvrrp_instance I {\n@^b state ${_HASH}x\n}\n")
	f.Fuzz(func(t *testing.T, data []byte) {
		st := fuzzImport(t, FormatKeepalived, data)
		if st == nil {
			return
		}
		reexport(t, FormatIpvsadm, st)
		reexport(t, FormatJSON, st)
		// What exports to keepalived imports back to the same document.
		var out bytes.Buffer
		if err := Export(FormatKeepalived, st, &out); err == nil {
			roundTrip(t, FormatKeepalived, st)
		}
	})
}

func FuzzImportLdirectord(f *testing.F) {
	seed(f, "ldirectord", ldFeatures, "virtual=198.18.0.1:80\n\treal=198.18.0.2->198.18.0.4:80 masq 2 \"a\", \"b\" l:1 u:9\n\tfallback=198.18.0.9:8080 masq\n",
		"fork=yes\nvirtual=3\n    real=198.18.0.2 gate\n    checkport=80\n    checkinterval=3\nvirtual=198.18.0.1:53\n    real=198.18.0.2:53 gate\n    checktype=2\n")
	f.Fuzz(func(t *testing.T, data []byte) {
		st := fuzzImport(t, FormatLdirectord, data)
		if st == nil {
			return
		}
		reexport(t, FormatIpvsadm, st)
		reexport(t, FormatJSON, st)
		var out bytes.Buffer
		if err := Export(FormatLdirectord, st, &out); err == nil {
			roundTrip(t, FormatLdirectord, st)
		}
	})
}
