package registry

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/sql/router/prealloc"
	"hubu.dev/hubu/sql/router/prealloc/preallocdb"
)

// isCodexKey says whether k is the only key shape a preallocated file may hold: only codex
// identities may start new operations in preallocated mode.
func isCodexKey(k string) bool {
	return contract.IsOperationKey(k) && strings.HasPrefix(k, contract.OperationKeyPrefix+"codex:")
}

// PreallocatedKeys claims operation keys from an operator's file, one per new call, atomically
// across every router process sharing the file. A key is claimed (and committed) before the
// call's registry row; a crash in between wastes a key and never reuses one.
type PreallocatedKeys struct {
	db  *sql.DB
	q   *preallocdb.Queries
	now func() time.Time
}

// ErrNoKeysLeft means every preallocated key was claimed.
var ErrNoKeysLeft = errors.New("no preallocated operation keys are left")

// OpenPreallocated opens a preallocated-keys file; with create, a missing file is made
// (0600: the keys are secrets). A router opens it without create, so a mistyped path is a
// start error rather than an empty file.
func OpenPreallocated(path string, create bool) (*PreallocatedKeys, error) {
	if err := safePath(path); err != nil {
		return nil, err
	}
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the preallocated keys: %w", err)
	}
	f.Close()
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		return nil, err
	}
	if _, err := db.Exec(prealloc.Schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("open the preallocated keys: %w", err)
	}
	return &PreallocatedKeys{db: db, q: preallocdb.New(), now: time.Now}, nil
}

// Close closes the file.
func (p *PreallocatedKeys) Close() error { return p.db.Close() }

// Add puts keys into the file; each must be a codex operation key.
func (p *PreallocatedKeys) Add(ctx context.Context, keys []string) error {
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after commit
	for _, k := range keys {
		if !isCodexKey(k) {
			return errors.New("a preallocated key must look like hubu:operation:v1:codex:<uuid>")
		}
		if err := p.q.AddKey(ctx, tx, k); err != nil {
			return fmt.Errorf("add a key: %w", err)
		}
	}
	return tx.Commit()
}

// Free counts the keys not yet claimed.
func (p *PreallocatedKeys) Free(ctx context.Context) (int64, error) {
	return p.q.CountFreeKeys(ctx, p.db)
}

// NewKey implements KeySource.
func (p *PreallocatedKeys) NewKey(ctx context.Context, platform string) (string, error) {
	if platform != "codex" {
		return "", ErrNewOperationRefused
	}
	now := p.now().UnixMilli()
	key, err := p.q.ClaimKey(ctx, p.db, &now)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNoKeysLeft
	}
	if err != nil {
		return "", fmt.Errorf("claim a preallocated key: %w", err)
	}
	if !isCodexKey(key) {
		return "", errors.New("the preallocated keys file holds a key of the wrong shape")
	}
	return key, nil
}
