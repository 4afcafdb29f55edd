package httpd_test

import (
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/httpd"
	"github.com/ipvsctl/ipvsctl/server/panel"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// Every kind of secret a director holds, each a string that cannot occur
// by chance.
const (
	secretBGPInDoc   = "Sx-bgp-in-document-41"                  // a BGP password put in the document (as before password_file)
	secretBGPDraft   = "Sx-bgp-in-draft-42"                     // the same, staged in a draft
	secretBGPFile    = "Sx-bgp-key-file-43"                     // a BGP key in its password_file
	secretVRRPFile   = "Sx-vrrp-key-file-44-0123456789abcdef"   // a VRRP key in its file
	secretAuthPass   = "SxAuth45"                               // keepalived's auth_pass, imported
	secretSSLPass    = "Sx-ssl-password-46"                     // keepalived's SSL key password, imported
	secretInlineHMAC = "Sx-hmac-inline-47-0123456789abcdef0123" // keepalived 2.4's auth_hmac key given inline
	secretPeerToken  = "Sx-peer-token-48-abcdefghijklmnopqrstu" // the token presented to the peer director
)

const secretsKeepalived = `global_defs {
    router_id lb1
}
SSL {
    password ` + secretSSLPass + `
    ca /etc/keepalived/ca.pem
}
# no virtual_router_id: the instance is kept whole, not run (the director stays alone for the walk)
vrrp_instance VI_1 {
    state MASTER
    interface eth0
    priority 100
    authentication {
        auth_type PASS
        auth_pass ` + secretAuthPass + `
    }
    auth_hmac {
        key 1 ` + secretInlineHMAC + `
    }
    virtual_ipaddress {
        198.18.0.100
    }
}
virtual_server 198.18.0.100 80 {
    lb_algo mh
    lb_kind DR
    protocol TCP
    real_server 198.18.0.11 80 {
        weight 1
    }
}
`

func bgpDoc(peer string) string {
	return `{"settings":{"tcp_timeout":0,"tcpfin_timeout":0,"udp_timeout":0,"bgp":{"asn":65001,"peers":[` + peer + `]}},
 "services":[{"name":"web","address":"198.18.0.100","port":80,"scheduler":"mh","servers":[{"name":"r1","address":"198.18.0.11","port":80}]}]}`
}

// TestNoSecretReachesAViewer fills a director with every kind of secret
// (through the API, as an admin would) and walks every route of the API's
// route table and every page of the panel that a viewer or an operator may
// GET, with each revision of the history: no answer holds any of them.
func TestNoSecretReachesAViewer(t *testing.T) {
	g := servertest.Start(t)
	admin := g.Tokens[auth.Admin]
	dir := t.TempDir()
	writeKey := func(name, key string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	vrrpKey, bgpKey := writeKey("vrrp.key", secretVRRPFile), writeKey("bgp.key", secretBGPFile)
	secrets := []string{secretBGPInDoc, secretBGPDraft, secretBGPFile, secretVRRPFile, secretAuthPass, secretSSLPass, secretInlineHMAC, secretPeerToken, "$argon2id$",
		admin, g.PanelLogin(t, "admin").Value} // the admin's token and a session of theirs
	leaks := func(where, body string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(body, s) {
				t.Errorf("%s: the answer holds %q", where, s)
			}
		}
	}
	seedBody := func(method, path, body string) (int, string) {
		t.Helper()
		resp, b := do(t, g, admin, method, path, body)
		leaks("admin's "+method+" "+path, b) // nor is a secret echoed to the admin who sent it
		return resp.StatusCode, b
	}
	seed := func(method, path, body string) int {
		t.Helper()
		c, _ := seedBody(method, path, body)
		return c
	}
	// 1: the keepalived file, its secrets kept among the imported keys.
	if c := seed("POST", "/api/v1/import?format=keepalived&name=lb1.conf&apply=false", secretsKeepalived); c != http.StatusOK {
		t.Fatalf("import: %d", c)
	}
	// 2: a BGP password in the document (refused now; taken before).
	inDoc, b3 := seedBody("PUT", "/api/v1/state?apply=false", bgpDoc(`{"address":"198.18.0.1","asn":65000,"password":"`+secretBGPInDoc+`"}`))
	// 3: the same key in a file (unknown before).
	inFile, b4 := seedBody("PUT", "/api/v1/state?apply=false", bgpDoc(`{"address":"198.18.0.1","asn":65000,"password_file":"`+bgpKey+`"}`))
	if inDoc == http.StatusOK == (inFile == http.StatusOK) {
		t.Errorf("PUT with password: %d %s, with password_file: %d %s; want exactly one taken", inDoc, b3, inFile, b4)
	}
	// A draft with a password in it, and the node's peer token.
	// The panel's import into the admin's draft, of a document with a
	// password (a draft is a whole document, shown at /drafts/{author}).
	if c, b := panelUpload(t, g, g.PanelLogin(t, "admin"), "/import", "json", "draft.json",
		bgpDoc(`{"address":"198.18.0.1","asn":65000,"password":"`+secretBGPDraft+`"}`)); c != http.StatusOK {
		t.Logf("import into the draft: %d (refused: %v)", c, strings.Contains(b, "password_file"))
	} else {
		leaks("admin's import preview", b)
	}
	if c, b := seedBody("PATCH", "/api/v1/node", `{"peer_url":"https://198.18.0.2:3636","peer_fingerprint":"sha256:`+strings.Repeat("ab", 32)+`","peer_token":"`+secretPeerToken+`"}`); c != http.StatusOK {
		t.Fatalf("PATCH the node: %d %s", c, b)
	}
	walk := func(stage string, minRevs int) {
		resp, hist := do(t, g, admin, "GET", "/api/v1/history?limit=100", "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("history: %d", resp.StatusCode)
		}
		revs := strings.Count(hist, `"id":`)
		if revs < minRevs {
			t.Fatalf("%s: %d revisions made, want %d at least: %s", stage, revs, minRevs, hist)
		}

		fill := func(path string, rev int) string {
			r := strings.NewReplacer("{id}", "web", "{sid}", "r1", "{author}", "admin", "{rev}", fmt.Sprint(rev),
				"{addr}", "198.18.0.100", "{name}", "admin")
			return r.Replace(path)
		}
		variants := func(path string) []string {
			out := []string{path}
			switch {
			case strings.HasSuffix(path, "/export"):
				for _, f := range []string{"json", "keepalived", "lvs.cf", "ipvsadm"} {
					out = append(out, path+"?format="+f)
				}
			case strings.HasSuffix(path, "/history"):
				out = append(out, path+"?limit=100")
			}
			return out
		}
		var apiGets, pageGets int
		for _, role := range []auth.Role{auth.Viewer, auth.Operator} {
			for _, rt := range httpd.Routes() {
				if rt.Method != "GET" || !auth.Allows(role, rt.Role) {
					continue
				}
				for rev := 1; rev <= revs; rev++ {
					if rev > 1 && !strings.Contains(rt.Pattern, "{rev}") {
						break
					}
					for _, p := range variants(fill(rt.Pattern, rev)) {
						resp, body := do(t, g, g.Tokens[role], "GET", p, "")
						if resp.StatusCode >= 500 {
							t.Errorf("%s GET %s: %d %s", role, p, resp.StatusCode, body)
						}
						leaks(role.String()+" GET "+p, body)
						apiGets++
					}
				}
			}
			for _, p := range []string{"/metrics", "/healthz"} {
				_, body := do(t, g, g.Tokens[role], "GET", p, "")
				leaks(role.String()+" GET "+p, body)
			}
			cookie := g.PanelLogin(t, role.String())
			for _, pat := range panel.RoutePatterns() {
				method, path, _ := strings.Cut(pat, " ")
				if method != "GET" || strings.HasPrefix(path, "/static/") {
					continue
				}
				path = strings.TrimSuffix(path, "{$}")
				for rev := 1; rev <= revs; rev++ {
					if rev > 1 && !strings.Contains(path, "{rev}") {
						break
					}
					for _, p := range variants(fill(path, rev)) {
						resp, body := g.Panel(t, cookie, "GET", p, nil)
						if resp.StatusCode >= 500 {
							t.Errorf("%s page %s: %d", role, p, resp.StatusCode)
						}
						leaks(role.String()+"'s page "+p, body)
						pageGets++
					}
				}
			}
		}
		t.Logf("%s: walked %d API GETs and %d panel pages as viewer and operator over %d revisions", stage, apiGets, pageGets, revs)
		if apiGets < 40 || pageGets < 30 {
			t.Errorf("%s: walked only %d API GETs and %d pages", stage, apiGets, pageGets)
		}
	}
	// The BGP document current (on the code before, the one with the
	// password in it), then the VRRP one.
	walk("BGP", 2)
	// Then (the director is a VRRP backup then, which takes no more
	// writes): VRRP with a key file.
	red := `{"settings":{"tcp_timeout":0,"tcpfin_timeout":0,"udp_timeout":0,"redundancy":{"vrid":51,"interface":"eth0","auth":{"keys":[{"id":1,"file":"` + vrrpKey + `"}]}}},
 "services":[{"name":"web","address":"198.18.0.100","port":80,"interface":"eth0","scheduler":"mh","servers":[{"name":"r1","address":"198.18.0.11","port":80}]}]}`
	if c := seed("PUT", "/api/v1/state?apply=false", red); c != http.StatusOK {
		t.Fatalf("PUT the VRRP document: %d", c)
	}
	walk("VRRP", 3)
}

// panelUpload posts a file to a panel form as a browser would.
func panelUpload(t *testing.T, g *servertest.Rig, cookie *http.Cookie, path, format, name, content string) (int, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	mw.WriteField("format", format)
	fw, err := mw.CreateFormFile("file", name)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(fw, content)
	mw.Close()
	req, err := http.NewRequest("POST", g.URL+path, &buf)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Accept", "text/html")
	req.AddCookie(cookie)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
