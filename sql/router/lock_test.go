package routersql

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func openLock(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// A second open of the lock file waits until the holder of the first unlocks: that is what
// makes two routers that migrate one registry take turns.
func TestLockFileExcludes(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "registry.lock")
	unlock, err := lockFile(openLock(t, path))
	if err != nil {
		t.Fatal(err)
	}
	second := openLock(t, path)
	locked := make(chan error, 1)
	go func() {
		unlock, err := lockFile(second)
		if err == nil {
			err = unlock()
		}
		locked <- err
	}()
	select {
	case err := <-locked:
		t.Fatalf("the second lock was granted while the first was held (err %v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-locked:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second lock was not granted within 10s of the first's release")
	}
}
