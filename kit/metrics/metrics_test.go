package metrics_test

import (
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"hubu.dev/hubu/kit/buildinfo"
	"hubu.dev/hubu/kit/leaktest"
	"hubu.dev/hubu/kit/metrics"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

func TestBuildInfo(t *testing.T) {
	info := buildinfo.Read()
	want := `# HELP demo_build_info Always 1; the labels say which build is running.
# TYPE demo_build_info gauge
demo_build_info{commit="` + info.Commit + `",go="` + info.GoVersion + `",version="` + info.Version + `"} 1
`
	if err := testutil.CollectAndCompare(metrics.NewBuildInfo("demo"), strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if info.GoVersion == "" {
		t.Fatal("the build info names no Go version")
	}
}

// The pool's gauges follow its connections: one acquired shows as acquired and open.
func TestPoolCollector(t *testing.T) {
	url := os.Getenv("TEST_DATABASE_URL")
	if url == "" {
		t.Fatal("TEST_DATABASE_URL is not set; run the tests with `make test`, which finds or starts a Postgres")
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 3
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	conn, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	c := metrics.NewPoolCollector("demo", pool)
	want := `# HELP demo_db_pool_acquired_conns Connections in use.
# TYPE demo_db_pool_acquired_conns gauge
demo_db_pool_acquired_conns 1
# HELP demo_db_pool_acquires_total Connections acquired from the pool.
# TYPE demo_db_pool_acquires_total counter
demo_db_pool_acquires_total 1
# HELP demo_db_pool_max_conns The most connections the pool opens.
# TYPE demo_db_pool_max_conns gauge
demo_db_pool_max_conns 3
# HELP demo_db_pool_total_conns Open connections, in use, idle or being opened.
# TYPE demo_db_pool_total_conns gauge
demo_db_pool_total_conns 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"demo_db_pool_acquired_conns", "demo_db_pool_acquires_total", "demo_db_pool_max_conns", "demo_db_pool_total_conns"); err != nil {
		t.Fatal(err)
	}
	conn.Release()
	want = `# HELP demo_db_pool_acquired_conns Connections in use.
# TYPE demo_db_pool_acquired_conns gauge
demo_db_pool_acquired_conns 0
# HELP demo_db_pool_idle_conns Open connections not in use.
# TYPE demo_db_pool_idle_conns gauge
demo_db_pool_idle_conns 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "demo_db_pool_acquired_conns", "demo_db_pool_idle_conns"); err != nil {
		t.Fatal(err)
	}
}
