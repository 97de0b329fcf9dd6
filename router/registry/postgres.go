package registry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"hubu.dev/hubu/kit/pgstart"
	"hubu.dev/hubu/sql/migrator"
	routersql "hubu.dev/hubu/sql/router"
	"hubu.dev/hubu/sql/router/routerpg"
)

// IsPostgres says whether a --state value names a Postgres database (a postgres:// or
// postgresql:// URL) rather than a registry file.
func IsPostgres(state string) bool {
	return strings.HasPrefix(state, "postgres://") || strings.HasPrefix(state, "postgresql://")
}

// keywordDSN says whether state looks like a libpq keyword=value connection string ("host=…
// password=…"), which the registry does not take: it would otherwise be read as a file path,
// and shown, password and all, wherever the path is.
func keywordDSN(state string) bool {
	if IsPostgres(state) {
		return false
	}
	for _, k := range []string{"host=", "dbname=", "user=", "password="} {
		if strings.Contains(state, k) {
			return true
		}
	}
	return false
}

// errKeywordDSN refuses a keyword=value connection string as --state.
var errKeywordDSN = errors.New("a keyword=value connection string is not taken: give the registry as a postgres:// URL, or a file path")

// Redact returns state as it may be logged or shown: a database URL without its password
// (in the user part or a password= or sslpassword= parameter); a file path as it is; nothing
// of a keyword=value connection string.
func Redact(state string) string {
	if keywordDSN(state) {
		return "a keyword=value connection string"
	}
	if !IsPostgres(state) {
		return state
	}
	u, err := url.Parse(state)
	if err != nil {
		return "a postgres:// URL that does not parse"
	}
	if q := u.Query(); q.Has("password") || q.Has("sslpassword") {
		for _, k := range []string{"password", "sslpassword"} {
			if q.Has(k) {
				q.Set(k, "xxxxx")
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// postgresStore is a registry in a Postgres database, shared by every router of a fleet. A
// statement is atomic across all of them, so it needs neither transactions nor the SQLite
// store's write queue: a new call's row is one INSERT ... ON CONFLICT DO NOTHING, committed when
// it returns, and the delivery that loses a race for a call reads the winner's row.
type postgresStore struct {
	pool           *pgxpool.Pool
	q              *routerpg.Queries
	installationID string
	now            func() time.Time
}

// openPostgres opens a pool on the database at databaseURL, migrates it (golang-migrate holds a
// Postgres advisory lock while it does, so routers starting together take turns), and makes
// or reads its installation id, which every router on the database then shares. Its errors
// never hold the URL's password.
func openPostgres(ctx context.Context, databaseURL string, now func() time.Time) (*postgresStore, string, error) {
	s, id, err := connectPostgres(ctx, databaseURL, now)
	if err != nil {
		return nil, "", withoutPassword(err, databaseURL)
	}
	return s, id, nil
}

func connectPostgres(ctx context.Context, databaseURL string, now func() time.Time) (*postgresStore, string, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, "", errors.New("not a valid PostgreSQL URL")
	}
	// A call's row must be on disk before any backend hears of the call (the SQLite file is
	// synchronous=FULL for the same reason): a row lost in a crash would give the call's
	// redelivery a new key, and Hubu would charge it again. So the registry's sessions commit
	// synchronously whatever the server's or the database's default says (all but a call's
	// answer, which setResult records without the flush).
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, "", fmt.Errorf("open the registry: %v", pgstart.Summary(err))
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, "", fmt.Errorf("cannot reach the database: %v", pgstart.Summary(err))
	}
	if err := migrator.Up(databaseURL, routersql.PostgresMigrations()); err != nil {
		pool.Close()
		return nil, "", fmt.Errorf("registry migrations: %w", err)
	}
	s := &postgresStore{pool: pool, q: routerpg.New(), now: now}
	if err := s.q.InsertInstallation(ctx, pool, routerpg.InsertInstallationParams{InstallationID: uuid.NewString(), CreatedAt: now()}); err != nil {
		pool.Close()
		return nil, "", fmt.Errorf("make the installation id: %w", err)
	}
	if s.installationID, err = s.q.GetInstallation(ctx, pool); err != nil {
		pool.Close()
		return nil, "", fmt.Errorf("read the installation id: %w", err)
	}
	return s, s.installationID, nil
}

// withoutPassword keeps the URL's password out of an error, whatever a driver put in it.
func withoutPassword(err error, databaseURL string) error {
	u, perr := url.Parse(databaseURL)
	if perr != nil {
		return err
	}
	msg := err.Error()
	for _, pw := range []string{passwordOf(u), u.Query().Get("password"), u.Query().Get("sslpassword")} {
		if pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	if msg == err.Error() {
		return err
	}
	return errors.New(msg)
}

func passwordOf(u *url.URL) string {
	if u.User == nil {
		return ""
	}
	pw, _ := u.User.Password()
	return pw
}

func (s *postgresStore) close() error {
	s.pool.Close()
	return nil
}

func (s *postgresStore) call(ctx context.Context, k callKey) (seenRow, bool, error) {
	row, err := s.q.GetCall(ctx, s.pool, routerpg.GetCallParams{Agent: k.agent, Platform: k.platform, InstallationID: s.installationID, HarnessCallID: k.callID})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return seenRow{}, false, nil
	case err != nil:
		return seenRow{}, false, err
	}
	return postgresRow(row), true, nil
}

// create makes the call's keys first and then tries to record them: a delivery that loses the
// race to another (in this router or another) wastes the keys it made, which for preallocated
// keys is one key never used, as after a crash between the claim and the row.
func (s *postgresStore) create(ctx context.Context, c Call, newEntry func() (Entry, error)) (seenRow, bool, error) {
	e, err := newEntry()
	if err != nil {
		// Another router may have recorded the call since this one looked, and a key source
		// that refuses (no preallocated keys left, say) must not answer a call in flight as
		// refused: its row wins.
		if row, found, lookErr := s.call(ctx, c.key()); lookErr == nil && found {
			return row, false, nil
		}
		return seenRow{}, false, err
	}
	now := s.now()
	inserted, err := s.q.InsertCall(ctx, s.pool, routerpg.InsertCallParams{
		Agent: c.Agent, Platform: c.Platform, InstallationID: s.installationID, HarnessCallID: c.CallID, Tool: c.Tool,
		RequestHash: c.RequestHash, OperationKey: e.OperationKey, PublicHandle: e.PublicHandle, ScopeDigest: c.Scope,
		CreatedAt: now, UpdatedAt: now,
	})
	if err != nil {
		return seenRow{}, false, fmt.Errorf("record the call: %w", err)
	}
	if inserted == 1 {
		return seenRow{entry: e, scope: c.Scope}, true, nil
	}
	row, found, err := s.call(ctx, c.key())
	switch {
	case err != nil:
		return seenRow{}, false, fmt.Errorf("look the call up: %w", err)
	case !found: // rows are only ever removed by an operator's prune of old calls
		return seenRow{}, false, errors.New("the call's row was removed while it was being recorded")
	}
	return row, false, nil
}

// setResult records a call's final answer without waiting for the disk (synchronous_commit off,
// for its own statement only), for the reasons sqliteStore.setResult gives: the answer is a
// cache of Hubu's and Gongbu's records, and a call whose answer a crash of Postgres lost is
// forwarded again under its operation key and answered from them.
func (s *postgresStore) setResult(ctx context.Context, k callKey, result []byte) error {
	// On the pool, never in a transaction (see the query).
	r := string(result)
	return s.q.SetResult(ctx, s.pool, routerpg.SetResultParams{
		Result: &r, UpdatedAt: s.now(), Agent: k.agent, Platform: k.platform, InstallationID: s.installationID, HarnessCallID: k.callID,
	})
}

func (s *postgresStore) operationKey(ctx context.Context, agent, publicHandle string) (string, bool, error) {
	key, err := s.q.GetOperationKeyByHandle(ctx, s.pool, routerpg.GetOperationKeyByHandleParams{PublicHandle: publicHandle, Agent: agent})
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return key, true, nil
}

func (s *postgresStore) count(ctx context.Context, before time.Time) (Counts, error) {
	all, err := s.q.CountCalls(ctx, s.pool, s.installationID)
	if err != nil {
		return Counts{}, err
	}
	prunable, err := s.q.CountPrunableCalls(ctx, s.pool, routerpg.CountPrunableCallsParams{InstallationID: s.installationID, Before: before})
	if err != nil {
		return Counts{}, err
	}
	return Counts{Calls: int(all.Calls), NotFinal: int(all.Calls - all.Final), Prunable: int(prunable)}, nil
}

// prune deletes a batch in one statement, its own transaction.
func (s *postgresStore) prune(ctx context.Context, before time.Time, limit int) (int, error) {
	n, err := s.q.PruneCalls(ctx, s.pool, routerpg.PruneCallsParams{InstallationID: s.installationID, Before: before, Batch: int32(min(limit, math.MaxInt32))})
	if err != nil {
		return 0, fmt.Errorf("delete: %w", err)
	}
	return int(n), nil
}

func postgresRow(row routerpg.Call) seenRow {
	e := Entry{OperationKey: row.OperationKey, PublicHandle: row.PublicHandle, RequestHash: row.RequestHash, Tool: row.Tool}
	if row.Result != nil {
		e.Result = []byte(*row.Result)
	}
	return seenRow{entry: e, scope: row.ScopeDigest}
}
