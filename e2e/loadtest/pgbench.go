package loadtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"hubu.dev/hubu/e2e/stack"
)

// PgbenchReport is the reference of scenario 2: pgbench's simple-update transactions (-N:
// one UPDATE, one SELECT, one INSERT) on the same server, at the scenario's concurrency and
// at one client.
type PgbenchReport struct {
	Scale     int        `json:"scale"`
	AtClients PgbenchRun `json:"at_clients"`
	AtOne     PgbenchRun `json:"at_1"`
}

// PgbenchRun is one pgbench -N run.
type PgbenchRun struct {
	Clients        int     `json:"clients"`
	Threads        int     `json:"threads"`
	TPS            float64 `json:"tps"`
	LatencyAverage Millis  `json:"latency_average_ms"`
}

// pgbenchDB is pgbench's scratch database, initialized and ready to run on.
type pgbenchDB struct {
	cfg  Config
	path string // the pgbench binary
	url  string
}

// preparePgbench makes the scratch database and runs pgbench -i in it; drop removes it.
func preparePgbench(ctx context.Context, cfg Config, path string) (db *pgbenchDB, drop func(), err error) {
	name := "pgbench_" + cfg.Name
	url, err := createDatabase(ctx, cfg.ServerURL, name)
	if err != nil {
		return nil, nil, err
	}
	drop = func() {
		if err := stack.DropDatabases(context.WithoutCancel(ctx), cfg.ServerURL, name); err != nil {
			cfg.say("could not drop %s: %v", name, err)
		}
	}
	cfg.say("pgbench: -i -s %d ...", cfg.PgbenchScale)
	if _, err := pgbench(ctx, path, "-i", "-q", "-s", strconv.Itoa(cfg.PgbenchScale), url); err != nil {
		drop()
		return nil, nil, err
	}
	return &pgbenchDB{cfg: cfg, path: path, url: url}, drop, nil
}

// run runs pgbench -N at clients clients for the scenario's duration.
func (db *pgbenchDB) run(ctx context.Context, clients int) (PgbenchRun, error) {
	secs := strconv.Itoa(int(db.cfg.Duration / time.Second))
	// pgbench takes at most as many threads as clients; two threads are the machine's cores.
	threads := min(2, clients)
	db.cfg.say("pgbench: -N -c %d -j %d -T %s ...", clients, threads, secs)
	out, err := pgbench(ctx, db.path, "-N", "-c", strconv.Itoa(clients), "-j", strconv.Itoa(threads), "-T", secs, db.url)
	if err != nil {
		return PgbenchRun{}, err
	}
	r, err := parsePgbench(out)
	r.Clients, r.Threads = clients, threads
	return r, err
}

// pgbench runs pgbench with args (the database's URL last) and returns its output.
func pgbench(ctx context.Context, path string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		// The last argument is the database URL: not repeated in the message.
		return "", fmt.Errorf("pgbench %s: %v: %s", strings.Join(args[:len(args)-1], " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

var (
	pgbenchTPS     = regexp.MustCompile(`(?m)^tps = ([0-9]+(?:\.[0-9]+)?)`)
	pgbenchLatency = regexp.MustCompile(`(?m)^latency average = ([0-9]+(?:\.[0-9]+)?) ms`)
)

// parsePgbench reads "tps = 3267.409448 (without initial connection time)" and "latency
// average = 0.612 ms" from pgbench's report.
func parsePgbench(out string) (PgbenchRun, error) {
	m := pgbenchTPS.FindStringSubmatch(out)
	if m == nil {
		return PgbenchRun{}, fmt.Errorf("pgbench printed no tps line: %s", strings.TrimSpace(out))
	}
	var r PgbenchRun
	r.TPS, _ = strconv.ParseFloat(m[1], 64) // the pattern admits only numbers
	if r.TPS <= 0 {
		return PgbenchRun{}, fmt.Errorf("pgbench made no transactions: %s", strings.TrimSpace(out))
	}
	if m := pgbenchLatency.FindStringSubmatch(out); m != nil {
		ms, _ := strconv.ParseFloat(m[1], 64)
		r.LatencyAverage = Millis(ms * float64(time.Millisecond))
	}
	return r, nil
}
