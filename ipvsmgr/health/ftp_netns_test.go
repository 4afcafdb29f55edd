package health

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// TestFTPCheckAgainstVsftpd: vsftpd (Debian's vsftpd) serving anonymous
// FTP from a directory. Its secure_email_list makes the anonymous
// password a real one (only the listed passwords log in), so a wrong
// password is refused without a user account on the host (ftp, the
// anonymous user, is the package's own).
func TestFTPCheckAgainstVsftpd(t *testing.T) {
	needServer(t, "vsftpd", "vsftpd")
	t.Parallel()
	ns, addr := serverNetns(t)
	dir := serverDir(t)
	root, empty := filepath.Join(dir, "ftp"), filepath.Join(dir, "empty")
	for _, d := range []string{root, empty} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(root, "health.txt"), "status: ok\n", 0o644)
	writeFile(t, filepath.Join(dir, "passwords"), "right-pw\n", 0o644)
	conf := filepath.Join(dir, "vsftpd.conf")
	writeFile(t, conf, fmt.Sprintf(`listen=YES
listen_ipv6=NO
listen_address=%[2]s
background=NO
anonymous_enable=YES
local_enable=NO
anon_root=%[1]s/ftp
secure_email_list_enable=YES
email_password_file=%[1]s/passwords
secure_chroot_dir=%[1]s/empty
ftp_username=ftp
pasv_enable=YES
seccomp_sandbox=NO
xferlog_enable=NO
delay_failed_login=0
vsftpd_log_file=%[1]s/vsftpd.xfer.log
`, dir, addr), 0o600)
	d := startDaemon(t, ns, dir, "vsftpd", "vsftpd", conf)
	spec := ipvsmgr.CheckSpec{Type: "ftp", Target: netip.AddrPortFrom(addr, 21), Login: "anonymous",
		PasswordFile: passwordFile(t, dir, "ftp.pw", "right-pw"), Request: "health.txt", Receive: "status: ok"}
	waitPass(t, ns, d, spec)
	if r := runIn(t, ns, spec); r.Reason != "health.txt: 11 bytes" {
		t.Errorf("ftp: %q, want health.txt: 11 bytes", r.Reason)
	}
	loginOnly := spec
	loginOnly.Request, loginOnly.Receive = "", ""
	if r := runIn(t, ns, loginOnly); r.Outcome != Pass || r.Reason != "logged in as anonymous" {
		t.Errorf("ftp login only: %s %q", r.Outcome, r.Reason)
	}
	wrongPW := spec
	wrongPW.PasswordFile = passwordFile(t, dir, "wrong.pw", "wrong-pw")
	wantFail(t, ns, wrongPW, "login: 530")
	missing := spec
	missing.Request = "gone.txt"
	wantFail(t, ns, missing, "RETR gone.txt: 550")
	other := spec
	other.Receive = "status: down"
	wantFail(t, ns, other, "11 bytes not matching receive")
	d.stop(t)
	wantFail(t, ns, spec, "connection refused")
}
