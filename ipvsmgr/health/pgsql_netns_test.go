package health

import (
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// pgBin is where Debian's postgresql (15 on bookworm) puts the server.
func pgBin(t *testing.T) string {
	t.Helper()
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(m) == 0 {
		needServer(t, "postgresql", "/usr/lib/postgresql/VERSION/bin/postgres")
	}
	return filepath.Dir(m[len(m)-1])
}

// TestPgSQLCheckAgainstPostgreSQL: PostgreSQL (Debian's postgresql), run
// as its postgres user (initdb refuses root), password (SCRAM) logins
// over TCP, a monitor role and a database with one row.
func TestPgSQLCheckAgainstPostgreSQL(t *testing.T) {
	needServer(t, "postgresql", "runuser")
	bin := pgBin(t)
	if _, err := exec.LookPath("psql"); err != nil {
		needServer(t, "postgresql-client", "psql")
	}
	t.Parallel()
	ns, addr := serverNetns(t)
	dir := serverDir(t)
	data := filepath.Join(dir, "data")
	// initdb lets TCP logins in from 127.0.0.1 only: the namespace's
	// address too, with a password.
	sh(t, fmt.Sprintf(`chown postgres: %[1]s && runuser -u postgres -- %[2]s/initdb -D %[3]s -U postgres --auth-local=trust --auth-host=scram-sha-256 >/dev/null &&
echo 'host all all %[4]s/32 scram-sha-256' >> %[3]s/pg_hba.conf`, dir, bin, data, addr))
	d := startDaemon(t, ns, dir, "postgres", "runuser", "-u", "postgres", "--", bin+"/postgres", "-D", data,
		"-k", dir, "-h", addr.String(), "-p", "5432", "-c", "shared_buffers=16MB", "-c", "fsync=off")
	target := netip.AddrPortFrom(addr, 5432)
	waitFor(t, ns, d, ipvsmgr.CheckSpec{Type: "tcp", Target: target})
	sh(t, fmt.Sprintf(`for i in $(seq 100); do psql -h %[1]s -p 5432 -U postgres -c 'SELECT 1' >/dev/null 2>&1 && break; sleep 0.1; done
psql -q -h %[1]s -p 5432 -U postgres -v ON_ERROR_STOP=1 -c "CREATE ROLE mon LOGIN PASSWORD 'right-pw'" -c "CREATE DATABASE app OWNER mon"
psql -q -h %[1]s -p 5432 -U mon -d app -v ON_ERROR_STOP=1 -c "CREATE TABLE pool (host text, enabled int)" -c "INSERT INTO pool VALUES ('r1', 1)"`, dir))
	spec := ipvsmgr.CheckSpec{Type: "pgsql", Target: target, Login: "mon", Database: "app",
		PasswordFile: passwordFile(t, dir, "pg.pw", "right-pw"), Request: "SELECT * FROM pool WHERE enabled = 1"}
	waitPass(t, ns, d, spec)

	noRow := spec
	noRow.Request = "SELECT * FROM pool WHERE enabled = 0"
	wantFail(t, ns, noRow, "query returned no row")
	wrongPW := spec
	wrongPW.PasswordFile = passwordFile(t, dir, "wrong.pw", "wrong-pw")
	wantFail(t, ns, wrongPW, "pgsql error 28P01")
	noDB := spec
	noDB.Database = "missing"
	wantFail(t, ns, noDB, "pgsql error 3D000")
	badSQL := spec
	badSQL.Request = "SELEC nonsense"
	wantFail(t, ns, badSQL, "pgsql error 42601")
	d.stop(t)
	wantFail(t, ns, spec, "connection refused")
}
