//go:build unix

package routersql

import (
	"os"
	"syscall"
)

// lockFile blocks until this process holds an exclusive lock on f, and returns the function
// that releases it. The lock belongs to the open file, so two opens of the same path contend
// even within one process.
func lockFile(f *os.File) (unlock func() error, err error) {
	fd := int(f.Fd())
	if err := syscall.Flock(fd, syscall.LOCK_EX); err != nil {
		return nil, err
	}
	return func() error { return syscall.Flock(fd, syscall.LOCK_UN) }, nil
}
