package registry

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// The registry's calls compile each query once, in and out of a transaction, and still
// answer what was written.
func TestStatementsAreCompiledOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, err := openSQLite(ctx, filepath.Join(t.TempDir(), "router.db"), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	for i := range 20 {
		c := Call{Platform: "codex", CallID: fmt.Sprintf("call_stmtcache%016d", i), Tool: "generate_image", RequestHash: "h"}
		e := Entry{OperationKey: fmt.Sprintf("hubu:operation:v1:codex:%d", i), PublicHandle: fmt.Sprintf("hubu:public-operation:v1:%d", i)}
		if _, created, err := s.create(ctx, c, func() (Entry, error) { return e, nil }); err != nil || !created {
			t.Fatalf("create %d: %v, created %v", i, err, created)
		}
		if err := s.setResult(ctx, c.key(), []byte(`{"n":1}`)); err != nil {
			t.Fatal(err)
		}
		row, found, err := s.call(ctx, c.key())
		if err != nil || !found || row.entry.OperationKey != e.OperationKey {
			t.Fatalf("call %d: %v, found %v, %+v", i, err, found, row.entry)
		}
		if key, found, err := s.operationKey(ctx, "", e.PublicHandle); err != nil || !found || key != e.OperationKey {
			t.Fatalf("operationKey %d: %q, %v, %v", i, key, found, err)
		}
	}
	// GetCall (in and out of the write transaction), InsertCall, SetResult, GetCallByHandle.
	s.stmts.mu.Lock()
	n := len(s.stmts.stmts)
	s.stmts.mu.Unlock()
	if n != 4 {
		t.Fatalf("%d statements compiled for four queries", n)
	}
}
