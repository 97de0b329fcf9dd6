package registry

import (
	"context"
	"path/filepath"
	"testing"

	"hubu.dev/hubu/sql/sqltest"
)

// backends are the registry's two stores. The tests of the registry's behaviour run on both:
// the same guarantees, proved by the same tests.
var backends = []struct {
	name string
	// newState returns the location of a new, empty registry: a file path, or the URL of a
	// database of the test's own (the registry migrates it on opening, as a router does).
	newState func(t *testing.T) string
}{
	{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "state", "router.db") }},
	{"postgres", func(t *testing.T) string { return sqltest.NewEmptyDatabase(t, "router_registry") }},
}

// onBothBackends runs test on each backend, in parallel; newState makes a new registry location
// on that backend.
func onBothBackends(t *testing.T, test func(t *testing.T, newState func() string)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			test(t, func() string { return b.newState(t) })
		})
	}
}

func open(t *testing.T, state string, opts *Options) *Registry {
	t.Helper()
	r, err := Open(context.Background(), state, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// closeDatabase closes the registry's database and keeps what it holds in memory, so that a
// test can show an answer came from memory: any read of the database now fails.
func closeDatabase(t *testing.T, r *Registry) {
	t.Helper()
	if err := r.store.close(); err != nil {
		t.Fatal(err)
	}
}

// queryValue runs a query of one value, in SQL both databases read alike, on the registry's
// database.
func queryValue[T any](t *testing.T, r *Registry, query string) T {
	t.Helper()
	var v T
	var err error
	switch s := r.store.(type) {
	case *sqliteStore:
		err = s.db.QueryRowContext(context.Background(), query).Scan(&v)
	case *postgresStore:
		err = s.pool.QueryRow(context.Background(), query).Scan(&v)
	default:
		t.Fatalf("a store of type %T", s)
	}
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return v
}
