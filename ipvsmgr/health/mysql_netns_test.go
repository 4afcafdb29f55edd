package health

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// TestMySQLCheckAgainstMariaDB: MariaDB (Debian's mariadb-server) with a
// monitor user and a database with one row in it.
func TestMySQLCheckAgainstMariaDB(t *testing.T) {
	needServer(t, "mariadb-server", "mariadb-install-db", "mariadbd", "mariadb")
	t.Parallel()
	ns, addr := serverNetns(t)
	dir := serverDir(t)
	data, sock := filepath.Join(dir, "data"), filepath.Join(dir, "mysql.sock")
	sh(t, fmt.Sprintf("mariadb-install-db --no-defaults --datadir=%s --user=root --skip-test-db --auth-root-authentication-method=socket", data))
	d := startDaemon(t, ns, dir, "mariadbd", "mariadbd", "--no-defaults", "--user=root", "--datadir="+data, "--socket="+sock,
		"--pid-file="+filepath.Join(dir, "mysql.pid"), "--bind-address="+addr.String(), "--port=3306",
		"--skip-log-bin", "--innodb-buffer-pool-size=16M", "--skip-name-resolve")
	target := netip.AddrPortFrom(addr, 3306)
	// Ready when it refuses a stranger: the server is then answering.
	waitFor(t, ns, d, ipvsmgr.CheckSpec{Type: "tcp", Target: target})
	sh(t, fmt.Sprintf(`for i in $(seq 100); do mariadb -S %s -u root -e 'SELECT 1' >/dev/null 2>&1 && break; sleep 0.1; done
mariadb -S %s -u root -e "CREATE USER mon@'%%' IDENTIFIED BY 'right-pw'; CREATE DATABASE app; CREATE TABLE app.pool (host VARCHAR(64), enabled INT);
INSERT INTO app.pool VALUES ('r1', 1); GRANT SELECT ON app.* TO mon@'%%';"`, sock, sock))
	spec := ipvsmgr.CheckSpec{Type: "mysql", Target: target, Login: "mon", Database: "app",
		PasswordFile: passwordFile(t, dir, "mysql.pw", "right-pw"), Request: "SELECT * FROM pool WHERE enabled = 1"}
	waitPass(t, ns, d, spec)

	noRow := spec
	noRow.Request = "SELECT * FROM pool WHERE enabled = 0"
	wantFail(t, ns, noRow, "query returned no row")
	wrongPW := spec
	wrongPW.PasswordFile = passwordFile(t, dir, "wrong.pw", "wrong-pw")
	wantFail(t, ns, wrongPW, "mysql error 1045: Access denied")
	noDB := spec
	noDB.Database = "missing"
	wantFail(t, ns, noDB, "mysql error 1044")
	badSQL := spec
	badSQL.Request = "SELEC nonsense"
	wantFail(t, ns, badSQL, "mysql error 1064")
	d.stop(t)
	wantFail(t, ns, spec, "connection refused")
}
