package registry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// BackupFile under a router that keeps writing: each copy is a consistent snapshot (every call
// in it whole, with the installation of the registry), at least as new as what was committed
// before it began, and the writer never fails nor waits for it. The registry itself is only
// read: not migrated, not created.
func TestBackupFileUnderAWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	state := filepath.Join(dir, "state", "router.db")
	router := open(t, state, nil)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	committed := 0 // calls resolved and, every other one, finished
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			c := pruneCall("backupWriter", i)
			start := time.Now()
			if _, _, err := router.Resolve(ctx, c); err != nil {
				t.Errorf("the router's call %d during a backup: %v", i, err)
				return
			}
			if i%2 == 0 {
				if _, err := router.Finish(ctx, c, []byte(`{"final":true}`)); err != nil {
					t.Errorf("the router's result %d during a backup: %v", i, err)
					return
				}
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the router's call %d took %s during a backup", i, d)
			}
			mu.Lock()
			committed = i + 1
			mu.Unlock()
		}
	})
	// Let the writer get going, so that the WAL holds calls not yet in the main file.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		mu.Lock()
		n := committed
		mu.Unlock()
		if n >= 50 {
			break
		}
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatalf("the writer committed %d calls in 10 s", n)
		}
	}

	var copies []FileBackup
	backupPath := func(i int) string { return filepath.Join(dir, fmt.Sprintf("router-%d.db", i)) }
	for i := range 5 {
		mu.Lock()
		atLeast := committed
		mu.Unlock()
		path := backupPath(i)
		b, err := BackupFile(ctx, state, path)
		if err != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("backup %d under a writer: %v", i, err)
		}
		if b.Calls < atLeast {
			t.Errorf("backup %d holds %d calls; %d were committed before it began", i, b.Calls, atLeast)
		}
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 || st.Size() != b.Bytes {
			t.Errorf("backup %d: %v %v, want 0600 and %d bytes", i, st, err, b.Bytes)
		}
		copies = append(copies, b)
	}
	close(stop)
	wg.Wait()

	// Each copy opens as a registry of the same installation, and replays exactly the calls
	// it counted: the finished ones whole, the others to be continued.
	for i, b := range copies {
		restored := open(t, backupPath(i), &Options{FinalsBytes: -1})
		if restored.InstallationID() != router.InstallationID() {
			t.Fatalf("backup %d has another installation id", i)
		}
		if got, err := restored.Count(ctx, time.Time{}); err != nil || got.Calls != b.Calls || got.NotFinal != b.NotFinal {
			t.Fatalf("backup %d counts %+v %v, the backup said %+v", i, got, err, b)
		}
		for j := range b.Calls {
			want := Continue
			if j%2 == 0 {
				want = Replay
			}
			// Only the last call copied may have been copied between its row and its result.
			if _, out, err := restored.Resolve(ctx, pruneCall("backupWriter", j)); err != nil || (out != want && j != b.Calls-1) {
				t.Fatalf("backup %d, call %d: %v %v, want %v", i, j, out, err, want)
			}
		}
	}
}

// BackupFile refuses what it cannot copy, and leaves no file behind when it refuses or fails:
// a path that is no registry, a missing registry (which it does not create), an existing
// target (which it does not overwrite), and a Postgres registry.
func TestBackupFileRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	state := filepath.Join(dir, "router.db")
	open(t, state, nil)
	notRegistry := filepath.Join(dir, "other.db")
	if err := os.WriteFile(notRegistry, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	existing := filepath.Join(dir, "existing.db")
	if err := os.WriteFile(existing, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(dir, "backup.db")
	for _, c := range []struct {
		state, to, want string
	}{
		{filepath.Join(dir, "missing.db"), fresh, "no such file"},
		{dir, fresh, "is not a file"},
		{notRegistry, fresh, "is it a router registry?"},
		{state, existing, "file exists"},
		{state, filepath.Join(dir, "no-such-dir", "b.db"), "no such file"},
		{"postgres://router:secret@127.0.0.1/router", fresh, "pg_dump"},
		{"host=127.0.0.1 password=secret", fresh, "keyword=value"},
	} {
		_, err := BackupFile(ctx, c.state, c.to)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("BackupFile(%s, %s): %v, want an error saying %q", c.state, c.to, err, c.want)
		}
		if c.to == fresh {
			if _, err := os.Stat(fresh); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("BackupFile(%s) left %s: %v", c.state, fresh, err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a backup created the registry it was to copy: %v", err)
	}
	if data, _ := os.ReadFile(existing); string(data) != "keep me" {
		t.Error("a backup wrote over an existing file")
	}
}
