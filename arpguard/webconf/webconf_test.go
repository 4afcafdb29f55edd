package webconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/tune"
)

// row is what a test expects of one finding.
type row struct {
	status  tune.Status
	where   string
	current string // "" not compared
	kind    string // "" not compared
}

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// asDump is a file as `nginx -T` prints it.
func asDump(path, text string) string {
	return "# configuration file " + path + ":\n" + text + "\n"
}

func checkFindings(t *testing.T, fs []tune.Finding, want map[string]row) {
	t.Helper()
	got := map[string]tune.Finding{}
	for _, f := range fs {
		if _, dup := got[f.Setting]; dup {
			t.Errorf("two findings for %q", f.Setting)
		}
		got[f.Setting] = f
		if f.Source == "" || f.Why == "" || f.Recommended == "" || f.Where == "" {
			t.Errorf("%s: a finding needs its source, why, recommendation and place: %+v", f.Setting, f)
		}
		if !strings.HasPrefix(f.Source, "https://nginx.org/en/docs/") && !strings.HasPrefix(f.Source, "https://docs.haproxy.org/2.6/configuration.html#") {
			t.Errorf("%s: source %q is not the server's manual", f.Setting, f.Source)
		}
	}
	for k, w := range want {
		f, ok := got[k]
		if !ok {
			t.Errorf("no finding %q; have %v", k, keys(got))
			continue
		}
		if f.Status != w.status || f.Where != w.where || w.current != "" && f.Current != w.current || w.kind != "" && f.Kind != w.kind {
			t.Errorf("%s = status %s, where %s, current %q, kind %s; want %s, %s, %q, %s (why: %s)",
				k, f.Status, f.Where, f.Current, f.Kind, w.status, w.where, w.current, w.kind, f.Why)
		}
	}
}

func keys(m map[string]tune.Finding) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func TestNginxFindings(t *testing.T) {
	const conf = "/etc/nginx/nginx.conf"
	for _, tc := range []struct {
		name   string
		dump   string
		host   Host
		dropIn string
		want   map[string]row
	}{
		{"debian 12 default, 4 CPUs, file limit 1024", readTestdata(t, "debian12-nginx-T.txt"), Host{CPUs: 4, NoFile: 1024, Somaxconn: 4096},
			"/etc/nginx/conf.d/ipvsctl-tune.conf", map[string]row{
				"nginx worker_processes":                     {tune.OK, conf + ":2", "auto", ""},
				"nginx worker_connections":                   {tune.Change, conf + ":8", "768", ""},
				"nginx worker_rlimit_nofile":                 {tune.Change, conf, "", ""},
				"nginx multi_accept":                         {tune.Change, conf + ":7", "off (default)", ""},
				"nginx listen 80 backlog":                    {tune.Change, "/etc/nginx/sites-enabled/default:22", "511", ""},
				"nginx listen 80 reuseport":                  {tune.Change, "/etc/nginx/sites-enabled/default:22", "off", ""},
				"nginx listen [::]:80 backlog":               {tune.Change, "/etc/nginx/sites-enabled/default:23", "511", ""},
				"nginx keepalive_requests":                   {tune.OK, conf + ":12", "1000 (default)", ""},
				"nginx access_log /var/log/nginx/access.log": {tune.Change, conf + ":40", "", ""},
				"nginx open_file_cache":                      {tune.Change, conf + ":12", "off (default)", KindNginxDropIn},
				"nginx sendfile":                             {tune.OK, conf + ":18", "on", ""},
				"nginx tcp_nopush":                           {tune.OK, conf + ":19", "on", ""},
			}},
		{"debian 12 default, one CPU, worker file limit 512", readTestdata(t, "debian12-nginx-T.txt"), Host{CPUs: 1, NoFile: 512, Somaxconn: 128},
			"/etc/nginx/conf.d/ipvsctl-tune.conf", map[string]row{
				"nginx worker_rlimit_nofile": {tune.Far, conf, "512 (the worker's open-files limit (/proc/PID/limits))", ""},
				"nginx listen 80 backlog":    {tune.Change, "/etc/nginx/sites-enabled/default:22", "511", ""},
				"nginx listen 80 reuseport":  {tune.Info, "/etc/nginx/sites-enabled/default:22", "off", ""},
			}},
		{"bitsofparag's: tuned, unbuffered log, no drop-in directory that takes ipvsctl-tune.conf", asDump(conf, readTestdata(t, "bitsofparag-nginx.conf")),
			Host{CPUs: 2, NoFile: 1024}, "", map[string]row{
				"nginx worker_processes":                     {tune.OK, conf + ":3", "auto", ""},
				"nginx worker_rlimit_nofile":                 {tune.OK, conf + ":4", "409600 (worker_rlimit_nofile)", ""},
				"nginx worker_connections":                   {tune.OK, conf + ":7", "4096", ""},
				"nginx multi_accept":                         {tune.OK, conf + ":8", "on", ""},
				"nginx sendfile":                             {tune.OK, conf + ":12", "on", ""},
				"nginx access_log /var/log/nginx/access.log": {tune.Change, conf + ":25", "", ""},
				// conf.d/*-http.conf does not match ipvsctl-tune.conf: advice only.
				"nginx open_file_cache": {tune.Change, conf + ":11", "off (default)", tune.KindManual},
			}},
		{"every rule's problem, across an include", asDump(conf, `worker_processes 1;
worker_rlimit_nofile 2048;
events {
    worker_connections 4096;
    multi_accept off;
}
http {
    include /tmp/web/conf.d/*.conf;
    keepalive_requests 100;
    sendfile off;
    access_log /var/log/nginx/a.log combined buffer=32k flush=5s;
    open_file_cache off;
    server {
        listen 198.18.7.2:80 backlog=8192;
        access_log /var/log/nginx/b.log;
    }
}`) + asDump("/tmp/web/conf.d/site.conf", `server {
    listen 8080 reuseport backlog=4096;
    location / { keepalive_requests 5000; }
}`), Host{CPUs: 8, NoFile: 1024, Somaxconn: 4096}, "/tmp/web/conf.d/ipvsctl-tune.conf", map[string]row{
			"nginx worker_processes":                                  {tune.Change, conf + ":1", "1", ""},
			"nginx worker_rlimit_nofile":                              {tune.Far, conf + ":2", "2048 (worker_rlimit_nofile)", ""},
			"nginx worker_connections":                                {tune.OK, conf + ":4", "4096", ""},
			"nginx multi_accept":                                      {tune.Change, conf + ":5", "off", ""},
			"nginx keepalive_requests":                                {tune.Change, conf + ":9", "100", ""},
			"nginx keepalive_requests at /tmp/web/conf.d/site.conf:3": {tune.OK, "/tmp/web/conf.d/site.conf:3", "5000", ""},
			"nginx sendfile":                                          {tune.Change, conf + ":10", "off", tune.KindManual},
			"nginx tcp_nopush":                                        {tune.Change, conf + ":7", "off (default)", KindNginxDropIn},
			"nginx access_log /var/log/nginx/a.log":                   {tune.OK, conf + ":11", "", ""},
			"nginx access_log /var/log/nginx/b.log":                   {tune.Change, conf + ":15", "", ""},
			"nginx open_file_cache":                                   {tune.Change, conf + ":12", "off", tune.KindManual},
			"nginx listen 198.18.7.2:80 backlog":                      {tune.Change, conf + ":14", "8192", ""},
			"nginx listen 198.18.7.2:80 reuseport":                    {tune.Info, conf + ":14", "off", ""}, // one worker
			"nginx listen 8080 backlog":                               {tune.OK, "/tmp/web/conf.d/site.conf:2", "4096", ""},
			"nginx listen 8080 reuseport":                             {tune.OK, "/tmp/web/conf.d/site.conf:2", "reuseport", ""},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files, err := SplitNginxDump(tc.dump)
			if err != nil {
				t.Fatal(err)
			}
			ds, err := ParseNginx(files)
			if err != nil {
				t.Fatal(err)
			}
			if got := NginxDropIn(ds); got != tc.dropIn {
				t.Errorf("drop-in %q, want %q", got, tc.dropIn)
			}
			checkFindings(t, NginxFindings(ds, files[0].Path, tc.host), tc.want)
		})
	}
}

func TestNginxKeepaliveRequestsLow(t *testing.T) {
	files, _ := SplitNginxDump(asDump("/n.conf", "events {}\nhttp {\n keepalive_requests 100;\n}"))
	ds, err := ParseNginx(files)
	if err != nil {
		t.Fatal(err)
	}
	checkFindings(t, NginxFindings(ds, "/n.conf", Host{}), map[string]row{
		"nginx keepalive_requests": {tune.Change, "/n.conf:3", "100", ""},
		"nginx worker_connections": {tune.Change, "/n.conf:1", "512 (default)", ""},
	})
}

func TestParseNginxErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"events {\n", "/n.conf:2: unexpected end of file"},
		{"worker_processes 1\n", "has no ending ';'"},
		{"}\n", "/n.conf:1: unexpected }"},
		{"a 'b;\n", "unterminated string"},
	} {
		files, err := SplitNginxDump(asDump("/n.conf", tc.text))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseNginx(files); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.text, err, tc.want)
		}
	}
	if _, err := SplitNginxDump("nginx: [emerg] unknown directive\n"); err == nil {
		t.Error("a dump without a file section parsed")
	}
}

func TestHAProxyFindings(t *testing.T) {
	const cfg = "/etc/haproxy/haproxy.cfg"
	for _, tc := range []struct {
		name string
		text string
		host Host
		want map[string]row
		none []string
	}{
		{"debian 12 default", readTestdata(t, "debian12-haproxy.cfg"), Host{CPUs: 2, NoFile: 1024}, map[string]row{
			"haproxy maxconn":      {tune.Change, cfg + ":1", "unset (about 512: derived from the open-files limit 1024)", ""},
			"haproxy nbthread":     {tune.OK, cfg + ":1", "", ""},
			"haproxy cpu-map":      {tune.Info, cfg + ":1", "unset", ""},
			"haproxy tune.bufsize": {tune.OK, cfg + ":1", "16384 (default)", ""},
		}, []string{"haproxy defaults : option http-server-close", "haproxy ulimit-n"}},
		{"aidaho12's: server-side close, limit raised by HAProxy itself", readTestdata(t, "aidaho12-haproxy.cfg"), Host{CPUs: 2, NoFile: 8033}, map[string]row{
			"haproxy maxconn": {tune.OK, cfg + ":6", "4000", ""},
			"haproxy defaults : option http-server-close": {tune.Change, cfg + ":20", "option http-server-close", ""},
		}, nil},
		{"aidaho12's under a file limit of 1024", readTestdata(t, "aidaho12-haproxy.cfg"), Host{CPUs: 2, NoFile: 1024}, map[string]row{
			"haproxy maxconn": {tune.Far, cfg + ":6", "4000", ""},
		}, nil},
		{"ulimit-n below maxconn's need, the process's limit unknown", "global\n maxconn 4000\n ulimit-n 1024\n", Host{}, map[string]row{
			"haproxy ulimit-n": {tune.Far, cfg + ":3", "1024", ""},
		}, nil},
		{"every rule's problem", `global
    maxconn 50000
    ulimit-n 4096   # too low
    nbthread 1
    tune.bufsize 8192
defaults
    mode http
backend app
    option httpclose
    http-reuse never
    server a 198.18.7.2:8080
`, Host{CPUs: 4, NoFile: 200000}, map[string]row{
			"haproxy maxconn":                       {tune.OK, cfg + ":2", "50000", ""},
			"haproxy ulimit-n":                      {tune.Change, cfg + ":3", "4096", ""}, // the process has 200000
			"haproxy nbthread":                      {tune.Change, cfg + ":4", "1", ""},
			"haproxy tune.bufsize":                  {tune.Change, cfg + ":5", "8192", ""},
			"haproxy backend app: option httpclose": {tune.Change, cfg + ":9", "", ""},
			"haproxy backend app: http-reuse":       {tune.Change, cfg + ":10", "never", ""},
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secs := ParseHAProxy([]File{{Path: cfg, Text: tc.text}})
			fs := HAProxyFindings(secs, cfg, tc.host)
			checkFindings(t, fs, tc.want)
			for _, f := range fs {
				for _, n := range tc.none {
					if f.Setting == n {
						t.Errorf("unexpected finding %+v", f)
					}
				}
			}
		})
	}
}

func TestHAProxyWords(t *testing.T) {
	for in, want := range map[string]string{
		"    stats realm HAProxy-04\\ Statistics\n": "stats|realm|HAProxy-04 Statistics",
		"maxconn 4000 # comment":                    "maxconn|4000",
		`http-request set-header X "a # b"`:         "http-request|set-header|X|a # b",
		"   # only a comment":                       "",
	} {
		if got := strings.Join(haproxyWords(in), "|"); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
