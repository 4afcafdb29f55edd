package health

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// checkSQL is ldirectord's check_sql for mysql and pgsql: log in as login
// to database, run request, and pass when it returns at least one row.
func checkSQL(ctx context.Context, spec *ipvsmgr.CheckSpec) Result {
	password, err := readSecret(spec.PasswordFile)
	if err != nil {
		return secretFault(err)
	}
	if spec.Type == "pgsql" {
		return checkPgSQL(ctx, spec, password)
	}
	return checkMySQL(ctx, spec, password)
}

func checkMySQL(ctx context.Context, spec *ipvsmgr.CheckSpec, password string) Result {
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr = "tcp", spec.Target.String()
	cfg.User, cfg.Passwd, cfg.DBName = spec.Login, password, spec.Database
	cfg.Timeout = spec.Timeout
	cfg.Logger = quietMySQL{} // the driver would print to stderr; the result says it
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return fault(shorten(err.Error()))
	}
	// One connection for one check: no pool kept between runs.
	db := sql.OpenDB(connector)
	defer db.Close()
	db.SetMaxIdleConns(0)
	rows, err := db.QueryContext(ctx, spec.Request)
	if err != nil {
		return describeSQL(ctx, spec, err)
	}
	defer rows.Close()
	return sqlRows(ctx, spec, rows.Next(), rows.Err())
}

func checkPgSQL(ctx context.Context, spec *ipvsmgr.CheckSpec, password string) Result {
	cfg, err := pgx.ParseConfig("")
	if err != nil {
		return fault(shorten(err.Error()))
	}
	// ParseConfig("") reads PG* variables and ~/.pgpass: the check's own
	// fields replace all of them.
	cfg.Host, cfg.Port = spec.Target.Addr().String(), spec.Target.Port()
	cfg.User, cfg.Password, cfg.Database = spec.Login, password, spec.Database
	cfg.TLSConfig, cfg.Fallbacks = nil, nil
	cfg.ConnectTimeout = spec.Timeout
	cfg.RuntimeParams = map[string]string{"application_name": "ipvsctl health check"}
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) { return dial(ctx, network, addr) }
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return describeSQL(ctx, spec, err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(closeCtx)
	}()
	rows, err := conn.Query(ctx, spec.Request)
	if err != nil {
		return describeSQL(ctx, spec, err)
	}
	defer rows.Close()
	next := rows.Next()
	if !next {
		rows.Close()
	}
	return sqlRows(ctx, spec, next, rows.Err())
}

// sqlRows is the verdict on a query's first row.
func sqlRows(ctx context.Context, spec *ipvsmgr.CheckSpec, got bool, err error) Result {
	if err != nil {
		return describeSQL(ctx, spec, err)
	}
	if !got {
		return fail("query returned no row")
	}
	return pass("query returned a row")
}

// describeSQL keeps the server's own message (wrong password, unknown
// database, syntax error): that is what an operator needs to read.
func describeSQL(ctx context.Context, spec *ipvsmgr.CheckSpec, err error) Result {
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		return fail("mysql error " + strconv.Itoa(int(my.Number)) + ": " + shorten(my.Message))
	}
	var pg interface{ SQLState() string }
	if errors.As(err, &pg) {
		return fail("pgsql error " + pg.SQLState() + ": " + shorten(err.Error()))
	}
	return describe(ctx, spec, err)
}

type quietMySQL struct{}

func (quietMySQL) Print(...any) {}
