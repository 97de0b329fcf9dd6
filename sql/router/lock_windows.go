package routersql

import (
	"math"
	"os"

	"golang.org/x/sys/windows"
)

// lockFile blocks until this process holds an exclusive lock on f, and returns the function
// that releases it. The lock covers every byte the file could have, as cmd/go's lockedfile
// does; os.OpenFile opens files for synchronous I/O, so LockFileEx waits for the lock rather
// than returning at once. Windows releases it when the handle closes too, but only "when
// resources allow", hence the explicit unlock.
func lockFile(f *os.File) (unlock func() error, err error) {
	h := windows.Handle(f.Fd())
	ol := new(windows.Overlapped)
	if err := windows.LockFileEx(h, windows.LOCKFILE_EXCLUSIVE_LOCK, 0, math.MaxUint32, math.MaxUint32, ol); err != nil {
		return nil, err
	}
	return func() error { return windows.UnlockFileEx(h, 0, math.MaxUint32, math.MaxUint32, ol) }, nil
}
