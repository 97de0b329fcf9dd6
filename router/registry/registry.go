// Package registry is the router's durable memory of trusted calls: one row per (agent,
// platform, installation, harness call id), with the call's private operation key, public
// handle and request hash, committed before any backend sees the call, so a crash at any later
// point is recovered by the redelivery. It lives in a SQLite file (WAL, synchronous=FULL),
// which several router processes on one machine may share, or in a Postgres database, which a
// router fleet (several routers behind a load balancer) shares; both keep the same guarantees.
package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"hubu.dev/hubu/proto/contract"
)

// Call is what identifies and describes one delivery.
type Call struct {
	// Agent is whom the call acts for: the agent's id in OAuth mode, "" for the static token's
	// agent (and stdio). Calls are the agent's: the same call id from two agents is two calls,
	// and a delivery is a redelivery only of its own agent's call.
	Agent    string
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
	// Conflict: the same call id (of the same agent) with another request: refused, no backend touched.
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

// Registry is an open registry: a SQLite file, or a Postgres database a router fleet shares.
type Registry struct {
	store          store
	installationID string
	keys           KeySource
	finals         *finals
}

// store is where a registry keeps its rows: a SQLite file (sqliteStore) or a Postgres database
// (postgresStore). How a delivery resolves against a row is the Registry's, the same for both;
// a store reads and writes rows, each in its database's own way of keeping concurrent first
// deliveries of one call, in any number of processes, to one row.
type store interface {
	// call reads the row of a call of this installation; found is false when it has none.
	call(ctx context.Context, k callKey) (row seenRow, found bool, err error)
	// create commits the row of a new call, with the keys newEntry makes, unless the call has a
	// row already: then it returns that row instead, and created is false.
	create(ctx context.Context, c Call, newEntry func() (Entry, error)) (row seenRow, created bool, err error)
	// setResult records a call's final result unless one is recorded.
	setResult(ctx context.Context, k callKey, result []byte) error
	// operationKey returns the private key behind a public handle of the agent's calls; found is
	// false when none of them has it.
	operationKey(ctx context.Context, agent, publicHandle string) (key string, found bool, err error)
	// count counts this installation's calls as Registry.Count does.
	count(ctx context.Context, before time.Time) (Counts, error)
	// prune deletes, in one transaction, at most limit of this installation's final calls created
	// and last updated before before, and returns how many it deleted.
	prune(ctx context.Context, before time.Time, limit int) (deleted int, err error)
	close() error
}

// Options configure Open. Nil fields take defaults.
type Options struct {
	Keys KeySource
	Now  func() time.Time
	// FinalsBytes bounds the final results kept in memory to answer redeliveries without
	// reading the database: DefaultFinalsBytes when 0, none when negative.
	FinalsBytes int
}

// Open opens the registry at state, creating and migrating it if needed, and makes or reads
// its installation id. A postgres:// or postgresql:// URL is a Postgres database, which a
// router fleet shares; anything else is the path of a SQLite file, made with 0600
// permissions in a 0700 directory.
func Open(ctx context.Context, state string, opts *Options) (*Registry, error) {
	if opts == nil {
		opts = &Options{}
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	var (
		s   store
		id  string
		err error
	)
	switch {
	case keywordDSN(state):
		return nil, errKeywordDSN
	case IsPostgres(state):
		s, id, err = openPostgres(ctx, state, now)
	default:
		s, id, err = openSQLite(ctx, state, now)
	}
	if err != nil {
		return nil, err
	}
	finalsBytes := opts.FinalsBytes
	switch {
	case finalsBytes == 0:
		finalsBytes = DefaultFinalsBytes
	case finalsBytes < 0:
		finalsBytes = 0
	}
	r := &Registry{store: s, installationID: id, keys: opts.Keys, finals: newFinals(finalsBytes)}
	if r.keys == nil {
		r.keys = GeneratedKeys{}
	}
	return r, nil
}

// Close closes the registry.
func (r *Registry) Close() error { return r.store.close() }

// InstallationID is this registry's installation.
func (r *Registry) InstallationID() string { return r.installationID }

// Resolve looks a delivery up and, for a new call, commits its row with fresh keys before
// returning. It is the only place a call's keys are made. A call seen before is resolved by
// a read alone, and a call whose final result is in memory (finals) without one; only a
// call not found is written, and the store looks again as it writes (see store.create). The
// Entry's Result is shared: it must not be modified.
func (r *Registry) Resolve(ctx context.Context, c Call) (Entry, Resolution, error) {
	k := c.key()
	if row, ok := r.finals.get(k); ok {
		e, res := resolveRow(row, c)
		return e, res, nil
	}
	row, found, err := r.store.call(ctx, k)
	if err != nil {
		return Entry{}, 0, fmt.Errorf("look the call up: %w", err)
	}
	if !found {
		var created bool
		row, created, err = r.store.create(ctx, c, func() (Entry, error) { return r.newEntry(ctx, c) })
		if err != nil {
			return Entry{}, 0, err
		}
		if created {
			return row.entry, New, nil
		}
		// Another delivery of the call, in this process or another, recorded it first.
	}
	seen := r.finals.put(k, row) // when it is final
	e, res := resolveRow(seen, c)
	return e, res, nil
}

// newEntry makes a new call's keys. Its error is the KeySource's, unwrapped: callers compare
// it with ErrNewOperationRefused and ErrNoKeysLeft.
func (r *Registry) newEntry(ctx context.Context, c Call) (Entry, error) {
	key, err := r.keys.NewKey(ctx, c.Platform)
	if err != nil {
		return Entry{}, err
	}
	return Entry{OperationKey: key, PublicHandle: contract.NewPublicHandle(), RequestHash: c.RequestHash, Tool: c.Tool}, nil
}

// Finish records a call's final result; later deliveries replay it without a backend.
// A result recorded before is kept. It returns the call's entry as recorded, whose Result
// is another delivery's when that one (in another router sharing the registry) was recorded
// first; the entry is empty, and the error nil, when the row could not be read back.
func (r *Registry) Finish(ctx context.Context, c Call, result []byte) (Entry, error) {
	k := c.key()
	if err := r.store.setResult(ctx, k, result); err != nil {
		return Entry{}, fmt.Errorf("record the result: %w", err)
	}
	// The row as recorded goes into finals for the redeliveries to come. It is only a cache:
	// a failed read leaves the next delivery to read the row.
	row, found, err := r.store.call(ctx, k)
	if err != nil || !found {
		return Entry{}, nil
	}
	return r.finals.put(k, row).entry, nil
}

// seenRow is what a delivery of a recorded call is resolved against.
type seenRow struct {
	entry Entry
	scope string // the digest of the conversation the call was first seen in, or ""
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

// OperationKeyFor returns the private key behind a public handle made by this registry for
// one of the agent's calls, for the scrubber of tools that name an operation by its handle.
// Another agent's handle is not found, as an unknown one is.
func (r *Registry) OperationKeyFor(ctx context.Context, agent, publicHandle string) (string, bool, error) {
	return r.store.operationKey(ctx, agent, publicHandle)
}
