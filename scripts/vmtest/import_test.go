//go:build vmtest

package vmtest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestImportAsIpvsadmSaves: what real ipvsadm saves from a table it made
// itself (a port-0 persistent service, fwmark DR and TUN real servers with
// the ports ipvsadm keeps and prints, GUE and GRE tunnels) imports, and ipvsctl's reconcile makes
// the kernel give ipvsadm -Sn the same lines back; a second import changes
// nothing.
func TestImportAsIpvsadmSaves(t *testing.T) {
	l := newLab(t, 2, false)
	rules := fmt.Sprintf("-A -t %[1]s:0 -s rr -p 300\n-a -t %[1]s:0 -r 198.18.0.11:0 -g -w 1\n"+
		"-A -f 7 -s wlc\n-a -f 7 -r 198.18.0.11:80 -g -w 1\n-a -f 7 -r 198.18.0.12:443 -i -w 2\n"+
		"-A -t %[1]s:80 -s wrr\n-a -t %[1]s:80 -r 198.18.0.12:80 -g -w 3\n"+
		"-A -t %[1]s:443 -s rr\n-a -t %[1]s:443 -r 198.18.0.11:443 -i -w 1 --tun-type gue --tun-port 6080 --tun-csum\n"+
		"-a -t %[1]s:443 -r 198.18.0.12:443 -i -w 1 --tun-type gre\n", vip)
	restore := exec.Command("ip", "netns", "exec", l.dir, "ipvsadm", "-R")
	restore.Stdin = strings.NewReader(rules)
	if out, err := restore.CombinedOutput(); err != nil {
		t.Fatalf("ipvsadm -R: %v\n%s", err, out)
	}
	saved := l.saved()
	if !strings.Contains(saved, "-r 198.18.0.12:443 -i") || !strings.Contains(saved, ":0 -s rr -p 300") || !strings.Contains(saved, "--tun-type gue --tun-port 6080") {
		t.Fatalf("ipvsadm -Sn does not print what this test is about:\n%s", saved)
	}
	l.ns(l.dir, "ipvsadm -C")
	f := t.TempDir() + "/saved"
	if err := os.WriteFile(f, []byte(saved), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := l.ipvsctl("import", "--format", "ipvsadm", f)
	if err != nil || !strings.Contains(out, "4 virtual services, 6 real servers, 0 kept") {
		t.Fatalf("ipvsctl import: %v\n%s", err, out)
	}
	if got := l.saved(); got != saved {
		t.Fatalf("after the import ipvsadm -Sn prints:\n%s\nwant what it saved:\n%s", got, saved)
	}
	if out, err = l.ipvsctl("import", "--format", "ipvsadm", f); err != nil || !strings.Contains(out, "0 changes applied") && !strings.Contains(out, "unchanged") {
		t.Fatalf("a second import changed things: %v\n%s", err, out)
	}
	t.Logf("ipvsadm -Sn, saved and after the import:\n%s", saved)
}
