package loadtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the router's SQLite driver

	"hubu.dev/hubu/e2e/stack"
	"hubu.dev/hubu/proto/hubuapi"
)

// ContractFloor is the least a new spend can take under the contracts of docs/design.md, whatever
// the code that keeps them: the transport floor, and the exchanges and durable commits that
// every new spend needs one after another, each timed in the same run as the spends. The
// spend's latency over it is what the implementation adds; the floor over the transport floor
// is what the contracts themselves cost in the unit the targets use.
type ContractFloor struct {
	// HTTP is a round trip to one of the services that does no work (GET /healthz on Hubu, on
	// a kept-alive connection): one hop between two layers.
	HTTP Dist `json:"http_round_trip"`
	// PostgresCommit is a one-row INSERT committed with synchronous_commit on, on the stack's
	// Postgres server: one durable commit of Hubu or Gongbu.
	PostgresCommit Dist `json:"postgres_commit"`
	// SQLiteCommit is a one-row INSERT in an IMMEDIATE transaction, with the router's settings,
	// beside its registry: one durable commit of the router.
	SQLiteCommit Dist `json:"sqlite_commit"`
	// Floor is contractFloor of the transport floor and these three, at p50.
	Floor Millis `json:"floor_ms"`
	// SpendOverFloor is a new spend's p50 over Floor.
	SpendOverFloor Ratio `json:"spend_over_contract_floor_p50"`
	// FloorOverTransport is Floor over the transport floor's p50 (tools/list).
	FloorOverTransport Ratio `json:"contract_floor_over_transport_floor_p50"`
}

// What a new spend cannot do without, one after another, under the contracts (a spend through
// the router that auto-approves and succeeds). Left out, because no guarantee needs them before
// the answer: the record of the outcome (Gongbu's, and the router's final answer), which this
// code commits before it answers so that what it answered is never lost, and every check that a
// signed decision could make locally.
const (
	// The router asks Hubu; Hubu hands the decision to Gongbu; Gongbu submits the job to the
	// provider, and asks it for the result (or is told, and fetches it).
	floorExchanges = 4
	// Hubu's decision with its budget hold, before the hand-off; Gongbu's record that it is
	// about to submit, before the provider call.
	floorPostgresCommits = 2
	// The router's registry row for the call, before it forwards the call.
	floorSQLiteCommits = 1
)

// floorTimeout bounds the timing of the contract floor: a stuck server leaves the floor
// unmeasured instead of holding up the run.
const floorTimeout = 2 * time.Minute

// contractFloor adds up a new spend's floor from the p50 of each part.
func contractFloor(transport, exchange, postgresCommit, sqliteCommit Millis) Millis {
	return transport + floorExchanges*exchange + floorPostgresCommits*postgresCommit + floorSQLiteCommits*sqliteCommit
}

// measureContractFloor times n of each part of the contract floor, taken in turn so that the
// three see the same moments of a noisy machine, and sets the floor and its ratios from the
// transport floor and the new spends already in rep. It runs after the rounds, outside the
// window their CPU time is measured in.
func measureContractFloor(ctx context.Context, cfg Config, t *target, rep *LatencyReport, n int) (*ContractFloor, error) {
	ctx, cancel := context.WithTimeout(ctx, floorTimeout)
	defer cancel()
	dbName := floorDB(cfg.Name)
	dbURL, err := createDatabase(ctx, cfg.ServerURL, dbName)
	if err != nil {
		return nil, fmt.Errorf("create the database for timing commits: %w", err)
	}
	defer func() {
		if err := stack.DropDatabases(context.WithoutCancel(ctx), cfg.ServerURL, dbName); err != nil {
			cfg.say("could not drop %s: %v", dbName, err)
		}
	}()
	pg, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", dbName, err)
	}
	defer pg.Close(context.WithoutCancel(ctx))
	if _, err := pg.Exec(ctx, "SET synchronous_commit = on"); err != nil {
		return nil, fmt.Errorf("set synchronous_commit: %w", err)
	}
	if _, err := pg.Exec(ctx, "CREATE TABLE floor (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, at timestamptz NOT NULL)"); err != nil {
		return nil, fmt.Errorf("create the Postgres table: %w", err)
	}

	// The router's settings (router/registry/sqlite.go, dsn), in the directory of its registry
	// (a directory of its own there, removed after).
	liteDir, err := os.MkdirTemp(t.floorDir, ".loadtest-floor-")
	if err != nil {
		return nil, fmt.Errorf("a directory for the SQLite file beside the router's registry: %w", err)
	}
	defer os.RemoveAll(liteDir)
	lite, err := sql.Open("sqlite", "file:"+filepath.Join(liteDir, "floor.db")+
		"?_txlock=immediate&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)")
	if err != nil {
		return nil, fmt.Errorf("open the SQLite file: %w", err)
	}
	defer lite.Close()
	lite.SetMaxOpenConns(1)
	if _, err := lite.ExecContext(ctx, "CREATE TABLE floor (id INTEGER PRIMARY KEY, at TEXT NOT NULL)"); err != nil {
		return nil, fmt.Errorf("create the SQLite table: %w", err)
	}

	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer hc.CloseIdleConnections()
	hubu, err := hubuapi.NewClient(t.hubuURL, hubuapi.WithHTTPClient(hc))
	if err != nil {
		return nil, err
	}

	var exchanges, pgCommits, liteCommits []time.Duration
	for range n {
		took, err := timed(func() error { return healthz(ctx, hubu) })
		if err != nil {
			return nil, fmt.Errorf("GET /healthz on Hubu: %w", err)
		}
		exchanges = append(exchanges, took)
		if took, err = timed(func() error {
			_, err := pg.Exec(ctx, "INSERT INTO floor (at) VALUES (now())")
			return err
		}); err != nil {
			return nil, fmt.Errorf("a Postgres commit: %w", err)
		}
		pgCommits = append(pgCommits, took)
		if took, err = timed(func() error { return sqliteCommit(ctx, lite) }); err != nil {
			return nil, fmt.Errorf("a SQLite commit: %w", err)
		}
		liteCommits = append(liteCommits, took)
	}
	f := &ContractFloor{HTTP: NewDist(exchanges), PostgresCommit: NewDist(pgCommits), SQLiteCommit: NewDist(liteCommits)}
	f.Floor = contractFloor(rep.ToolsList.P50, f.HTTP.P50, f.PostgresCommit.P50, f.SQLiteCommit.P50)
	f.SpendOverFloor = ratio(float64(rep.Spend.P50), float64(f.Floor))
	f.FloorOverTransport = ratio(float64(f.Floor), float64(rep.ToolsList.P50))
	return f, nil
}

// floorDB is the scratch database the contract floor's Postgres commits are timed in.
func floorDB(name string) string { return "hubu_" + name + "_floor" }

func timed(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return time.Since(start), err
}

// healthz asks a service whether it is up, through its generated client, and reads the whole
// answer.
func healthz(ctx context.Context, c *hubuapi.Client) error {
	resp, err := c.GetHealthz(ctx)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

func sqliteCommit(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO floor (at) VALUES (?)", time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}
