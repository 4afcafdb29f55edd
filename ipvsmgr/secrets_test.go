package ipvsmgr

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestScrubImportedLeavesNoSecret(t *testing.T) {
	keys := []ImportedKey{
		{Source: "keepalived", Key: "vrrp_instance VI_1", Value: "state MASTER\n  authentication {\n    auth_type PASS\n    auth_pass s3cr3tPW\n  }\n"},
		{Source: "keepalived", Key: "vrrp_instance VI_2", Value: "authentication { auth_type PASS auth_pass \"quoted pw\" }"},
		{Source: "keepalived", Key: "SSL", Value: "password sslKeyPass\n ca /etc/ca.pem\n key /etc/key.pem"},
		{Source: "keepalived", Key: "vrrp_instance VI_3", Value: "auth_hmac {\n key 1 hmacInlineSecret0123456789abcdef0123\n key 2 file:/etc/k2\n }"},
		{Source: "lvs.cf", Key: "passwd", Value: "lvsPW"},
		{Source: "keepalived", Key: "virtual_server 1.2.3.4 80", Value: "delay_loop 6\n lb_algo rr"},
	}
	n := ScrubImported(keys)
	if n != 5 {
		t.Errorf("replaced %d secrets, want 5", n)
	}
	all, _ := json.Marshal(keys)
	for _, s := range []string{"s3cr3tPW", "quoted pw", "sslKeyPass", "hmacInlineSecret", "lvsPW"} {
		if bytes.Contains(all, []byte(s)) {
			t.Errorf("%q is still in %s", s, all)
		}
	}
	for _, keep := range []string{"file:/etc/k2", "/etc/key.pem", "auth_type PASS", "lb_algo rr"} {
		if !bytes.Contains(all, []byte(keep)) {
			t.Errorf("%q, not a secret, is gone: %s", keep, all)
		}
	}
	if ScrubImported(keys) != 0 {
		t.Error("a second scrub replaced something again")
	}
}

func TestDecodeScrubsImportedSecrets(t *testing.T) {
	doc := `{"settings":{"tcp_timeout":0,"tcpfin_timeout":0,"udp_timeout":0},"services":[],"imported":[{"source":"keepalived","line":3,"key":"vrrp_instance VI_1","value":"auth_pass hunter22"}]}`
	st, err := DecodeState(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if v := st.Imported[0].Value; strings.Contains(v, "hunter22") || !strings.Contains(v, SecretNotKept) {
		t.Errorf("imported value after decode: %q", v)
	}
}

func TestBGPPasswordInTheDocumentIsRefusedAndNeverWritten(t *testing.T) {
	doc := `{"settings":{"tcp_timeout":0,"tcpfin_timeout":0,"udp_timeout":0,"bgp":{"asn":65001,"peers":[{"address":"198.18.0.1","asn":65000,"password":"md5-Secret-1"}]}},"services":[]}`
	st, err := DecodeState(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Compile(st)
	if err == nil {
		t.Fatal("a password in the document was accepted")
	}
	msg := err.Error()
	if !strings.Contains(msg, "settings.bgp.peers[0].password") || !strings.Contains(msg, "password_file") || strings.Contains(msg, "md5-Secret-1") {
		t.Errorf("error %q: want the field named, password_file suggested, the key not echoed", msg)
	}
	var b bytes.Buffer
	if err := st.Encode(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "md5-Secret-1") || strings.Contains(b.String(), `"password"`) {
		t.Errorf("encoded document holds the key: %s", b.String())
	}
	st.Settings.BGP.Peers[0].LegacyPassword = ""
	st.Settings.BGP.Peers[0].PasswordFile = "etc/key"
	if _, err := Compile(st); err == nil || !strings.Contains(err.Error(), "settings.bgp.peers[0].password_file") || !strings.Contains(err.Error(), "etc/key") {
		t.Errorf("a relative password_file: %v", err)
	}
	st.Settings.BGP.Peers[0].PasswordFile = "/etc/ipvsctl/bgp.key"
	if _, err := Compile(st); err != nil {
		t.Errorf("an absolute password_file: %v", err)
	}
}
