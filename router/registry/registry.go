// Package registry is the router's durable memory of trusted calls: a SQLite file (WAL,
// synchronous=FULL) with one row per (platform, installation, harness call id). A call's row,
// with its private operation key, public handle and request hash, is committed before any
// backend sees the call, so a crash at any later point is recovered by the redelivery.
// Several router processes may share one file: every decision is an IMMEDIATE transaction.
package registry

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	_ "modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"

	"hubu.dev/hubu/proto/contract"
	routersql "hubu.dev/hubu/sql/router"
	"hubu.dev/hubu/sql/router/routerdb"
)

// Call is what identifies and describes one delivery.
type Call struct {
	Platform string
	CallID   string // the harness's per-call id; trusted, never model-written
	// Scope is a digest of the conversation the harness says the call belongs to (identity.Identity.Scope),
	// or "" when it says none. Recorded with the call's row; never the conversation id itself.
	Scope       string
	Tool        string
	RequestHash string
}

// Entry is a call's row.
type Entry struct {
	OperationKey string // private: for Hubu only
	PublicHandle string
	RequestHash  string
	Tool         string
	Result       []byte // the final result, once there is one; shared, never to be modified
	// decoded is the caller's decoding of a Result the registry keeps in memory (finals).
	decoded *decoded
}

type decoded struct {
	once sync.Once
	v    any
	err  error
}

// Decoded returns decode(e.Result). Of a final result the registry keeps in memory it is
// computed once, and every later delivery of the call gets the same value: callers must not
// modify it, nor pass another decode for the same registry.
func (e Entry) Decoded(decode func([]byte) (any, error)) (any, error) {
	if e.decoded == nil {
		return decode(e.Result)
	}
	e.decoded.once.Do(func() { e.decoded.v, e.decoded.err = decode(e.Result) })
	return e.decoded.v, e.decoded.err
}

// Warm decodes now a final result the registry keeps in memory, so that the first delivery
// to call Decoded finds it done; it does nothing for any other result.
func (e Entry) Warm(decode func([]byte) (any, error)) {
	if e.decoded != nil {
		_, _ = e.Decoded(decode)
	}
}

// Resolution is how a delivery resolves against the registry.
type Resolution int

const (
	// New: the call was not known; its row was just committed with fresh keys.
	New Resolution = iota
	// Continue: the same call and request, not final yet (in flight, crashed, held for
	// approval): it goes on under the same key.
	Continue
	// Replay: the same call and request with a final result: answer it, touch no backend.
	Replay
	// Conflict: the same call id with another request: refused, no backend touched.
	Conflict
	// ScopeConflict: the same call id from another conversation than the one it was first
	// seen in: not a redelivery but a repeated id. Refused, never replayed, no backend touched.
	ScopeConflict
)

func (res Resolution) String() string {
	return [...]string{"new", "continue", "replay", "conflict", "scope_conflict"}[res]
}

// KeySource makes the private operation key of a new call. Generated keys are the
// default; an operator may configure preallocated ones instead.
type KeySource interface {
	NewKey(ctx context.Context, platform string) (string, error)
}

// ErrNewOperationRefused is returned by a KeySource that may not start an operation for a platform.
var ErrNewOperationRefused = errors.New("this router may not start new operations for that platform")

// GeneratedKeys makes random keys: hubu:operation:v1:<platform>:<uuid>.
type GeneratedKeys struct{}

// NewKey implements KeySource.
func (GeneratedKeys) NewKey(_ context.Context, platform string) (string, error) {
	return contract.NewOperationKey(platform), nil
}

// Registry is an open registry file.
type Registry struct {
	db             *sql.DB
	q              *routerdb.Queries
	installationID string
	keys           KeySource
	now            func() time.Time
	// writes queues this process's writers in Go. SQLite lets one writer in at a time and
	// makes the others retry on a timer (busy_timeout), which under a few hundred concurrent
	// calls is unfair enough to starve one past its timeout; queued here, each waits its
	// turn, and only writers in other processes still meet the busy timeout.
	writes sync.Mutex
	finals *finals
}

// Options configure Open. Nil fields take defaults.
type Options struct {
	Keys KeySource
	Now  func() time.Time
	// FinalsBytes bounds the final results kept in memory to answer redeliveries without
	// reading the file: DefaultFinalsBytes when 0, none when negative.
	FinalsBytes int
}

// maxConns bounds the registry's SQLite connections. Each has a page cache of its own (up
// to 2 MiB, SQLite's default), and database/sql would otherwise open one per concurrent
// call: under a few hundred of them, dozens of connections whose caches together are tens
// of megabytes. Writers take turns anyway (writes), and a read holds a connection for
// tens of microseconds, so a few are enough for both.
const maxConns = 4

// Open opens (creating if needed) the registry at path with 0600 permissions in a 0700
// directory, migrates it, and makes or reads its installation id.
func Open(ctx context.Context, path string, opts *Options) (*Registry, error) {
	if opts == nil {
		opts = &Options{}
	}
	if err := safePath(path); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create the state directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the registry: %w", err)
	}
	f.Close()
	if err := os.Chmod(path, 0o600); err != nil { // a file made by someone else keeps no wider mode
		return nil, fmt.Errorf("secure the registry: %w", err)
	}
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		return nil, fmt.Errorf("open the registry: %w", err)
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	if err := routersql.Migrate(db, path); err != nil {
		db.Close()
		return nil, err
	}
	finalsBytes := opts.FinalsBytes
	switch {
	case finalsBytes == 0:
		finalsBytes = DefaultFinalsBytes
	case finalsBytes < 0:
		finalsBytes = 0
	}
	r := &Registry{db: db, q: routerdb.New(), keys: opts.Keys, now: opts.Now, finals: newFinals(finalsBytes)}
	if r.keys == nil {
		r.keys = GeneratedKeys{}
	}
	if r.now == nil {
		r.now = time.Now
	}
	if err := r.q.InsertInstallation(ctx, db, routerdb.InsertInstallationParams{InstallationID: uuid.NewString(), CreatedAt: r.now().UnixMilli()}); err != nil {
		db.Close()
		return nil, fmt.Errorf("make the installation id: %w", err)
	}
	if r.installationID, err = r.q.GetInstallation(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("read the installation id: %w", err)
	}
	return r, nil
}

// dsn is the SQLite URI of a file: every connection is IMMEDIATE, WAL, synchronous=FULL.
func dsn(path string) string {
	return "file:" + path + "?_txlock=immediate&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)"
}

// safePath refuses paths SQLite would read as URI syntax: they would open another file
// without the settings above.
func safePath(path string) error {
	if strings.ContainsAny(path, "?#%") {
		return fmt.Errorf("the path %q may not contain ?, # or %%", path)
	}
	return nil
}

// Close closes the registry.
func (r *Registry) Close() error { return r.db.Close() }

// InstallationID is this registry's installation.
func (r *Registry) InstallationID() string { return r.installationID }

// Resolve looks a delivery up and, for a new call, commits its row with fresh keys before
// returning. It is the only place a call's keys are made. A call seen before is resolved by
// a read alone, and a call whose final result is in memory (finals) without one; only a
// call not found takes the write lock, and looks again under it. The Entry's Result is
// shared: it must not be modified.
func (r *Registry) Resolve(ctx context.Context, c Call) (Entry, Resolution, error) {
	if row, ok := r.finals.get(c.Platform, c.CallID); ok {
		e, res := resolveRow(row, c)
		return e, res, nil
	}
	if e, res, found, err := r.resolveSeen(ctx, r.db, c); found || err != nil {
		return e, res, err
	}
	r.writes.Lock()
	defer r.writes.Unlock()
	tx, err := r.db.BeginTx(ctx, nil) // IMMEDIATE (see the DSN): one writer decides at a time
	if err != nil {
		return Entry{}, 0, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after commit

	// Another delivery of the call, in this process or another, may have recorded it since.
	if e, res, found, err := r.resolveSeen(ctx, tx, c); found || err != nil {
		return e, res, err
	}
	key, err := r.keys.NewKey(ctx, c.Platform)
	if err != nil {
		return Entry{}, 0, err
	}
	e := Entry{OperationKey: key, PublicHandle: contract.NewPublicHandle(), RequestHash: c.RequestHash, Tool: c.Tool}
	now := r.now().UnixMilli()
	if err := r.q.InsertCall(ctx, tx, routerdb.InsertCallParams{
		Platform: c.Platform, InstallationID: r.installationID, HarnessCallID: c.CallID, Tool: c.Tool,
		RequestHash: c.RequestHash, OperationKey: e.OperationKey, PublicHandle: e.PublicHandle, ScopeDigest: c.Scope,
		CreatedAt: now, UpdatedAt: now,
	}); err != nil {
		return Entry{}, 0, fmt.Errorf("record the call: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return Entry{}, 0, fmt.Errorf("commit the call: %w", err)
	}
	return e, New, nil
}

// Finish records a call's final result; later deliveries replay it without a backend.
// A result recorded before is kept. It returns the call's entry as recorded, whose Result
// is another delivery's when that one (in another router sharing the file) was recorded
// first; the entry is empty, and the error nil, when the row could not be read back.
func (r *Registry) Finish(ctx context.Context, c Call, result []byte) (Entry, error) {
	if err := r.setResult(ctx, c, result); err != nil {
		return Entry{}, err
	}
	// The row as recorded goes into finals for the redeliveries to come. It is only a cache:
	// a failed read leaves the next delivery to read the row.
	row, err := r.q.GetCall(ctx, r.db, routerdb.GetCallParams{Platform: c.Platform, InstallationID: r.installationID, HarnessCallID: c.CallID})
	if err != nil {
		return Entry{}, nil
	}
	return r.finals.put(c.Platform, c.CallID, rowOf(row)).entry, nil
}

func (r *Registry) setResult(ctx context.Context, c Call, result []byte) error {
	r.writes.Lock()
	defer r.writes.Unlock()
	s := string(result)
	err := r.q.SetResult(ctx, r.db, routerdb.SetResultParams{
		Result: &s, UpdatedAt: r.now().UnixMilli(), Platform: c.Platform, InstallationID: r.installationID, HarnessCallID: c.CallID,
	})
	if err != nil {
		return fmt.Errorf("record the result: %w", err)
	}
	return nil
}

// resolveSeen resolves a call the registry has recorded; found is false for one it has not.
func (r *Registry) resolveSeen(ctx context.Context, db routerdb.DBTX, c Call) (e Entry, res Resolution, found bool, err error) {
	row, err := r.q.GetCall(ctx, db, routerdb.GetCallParams{Platform: c.Platform, InstallationID: r.installationID, HarnessCallID: c.CallID})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Entry{}, 0, false, nil
	case err != nil:
		return Entry{}, 0, false, fmt.Errorf("look the call up: %w", err)
	}
	seen := r.finals.put(c.Platform, c.CallID, rowOf(row)) // when it is final
	e, res = resolveRow(seen, c)
	return e, res, true, nil
}

// seenRow is what a delivery of a recorded call is resolved against.
type seenRow struct {
	entry Entry
	scope string // the digest of the conversation the call was first seen in, or ""
}

func rowOf(row routerdb.Call) seenRow {
	return seenRow{entry: entryOf(row), scope: row.ScopeDigest}
}

// resolveRow resolves a delivery of a call against the call's row.
func resolveRow(row seenRow, c Call) (Entry, Resolution) {
	switch {
	// A row recorded without a scope (before scopes were recorded) is never refused for one.
	case row.scope != "" && row.scope != c.Scope:
		return Entry{}, ScopeConflict
	case row.entry.RequestHash != c.RequestHash || row.entry.Tool != c.Tool:
		return Entry{}, Conflict
	case row.entry.Result != nil:
		return row.entry, Replay
	}
	return row.entry, Continue
}

// OperationKeyFor returns the private key behind a public handle made by this registry,
// for the scrubber of tools that name an operation by its handle.
func (r *Registry) OperationKeyFor(ctx context.Context, publicHandle string) (string, bool, error) {
	row, err := r.q.GetCallByHandle(ctx, r.db, publicHandle)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return row.OperationKey, true, nil
}

func entryOf(row routerdb.Call) Entry {
	e := Entry{OperationKey: row.OperationKey, PublicHandle: row.PublicHandle, RequestHash: row.RequestHash, Tool: row.Tool}
	if row.Result != nil {
		e.Result = []byte(*row.Result)
	}
	return e
}
