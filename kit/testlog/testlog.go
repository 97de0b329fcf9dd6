// Package testlog collects what a service or a child process logs, for a test to read while
// the writers still write. Production code never imports it.
package testlog

import (
	"bytes"
	"sync"
)

// Buffer is an io.Writer safe for concurrent writers and readers.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
