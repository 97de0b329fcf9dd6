// Package journal is an append-only file of JSON lines, each made durable (fsync) before
// Append returns. It is how mockflux keeps its jobs and charges across restarts.
package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// File is an open journal. Appends are serialised; a failed append is rolled back, or, when
// even that fails, the journal refuses every later append rather than write after a torn line.
type File struct {
	mu     sync.Mutex
	f      *os.File
	size   int64
	broken error
}

// Open opens (or creates) the journal at path, takes an exclusive lock on it so that two
// processes never append to one file, and returns its records in order. A last line without
// its newline is a write torn by a crash before it was acknowledged; it is dropped.
func Open(path string) (*File, []json.RawMessage, error) {
	_, statErr := os.Stat(path)
	created := errors.Is(statErr, os.ErrNotExist)
	// O_APPEND: every write lands at the end, also after a truncation, so no offset to keep.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s is in use by another process", path)
	}
	records, good, err := read(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if created {
		// The new file's directory entry must be durable too, or a crash could lose the file.
		if err := syncDir(filepath.Dir(path)); err != nil {
			f.Close()
			return nil, nil, err
		}
	}
	return &File{f: f, size: good}, records, nil
}

// read returns the records and the length of the good lines, cutting a torn last line off.
func read(f *os.File) ([]json.RawMessage, int64, error) {
	var records []json.RawMessage
	var good int64
	r := bufio.NewReader(f)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return records, good, f.Truncate(good) // a partial last line, if any, is torn
		}
		if err != nil {
			return nil, 0, err
		}
		body := bytes.TrimSpace(line)
		if !json.Valid(body) || len(body) == 0 || body[0] != '{' {
			return nil, 0, fmt.Errorf("line %d is not a JSON object", n)
		}
		records = append(records, json.RawMessage(body))
		good += int64(len(line))
	}
}

// Append writes v as one line and syncs it to stable storage.
func (j *File) Append(v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.broken != nil {
		return j.broken
	}
	if _, err := j.f.Write(line); err != nil {
		return j.rollback(err)
	}
	if err := j.f.Sync(); err != nil {
		return j.rollback(err)
	}
	j.size += int64(len(line))
	return nil
}

func (j *File) rollback(cause error) error {
	if err := j.f.Truncate(j.size); err != nil {
		j.broken = fmt.Errorf("journal unusable after a failed append (%v): %w", cause, err)
		return j.broken
	}
	return cause
}

// Err is why the journal refuses appends (a failed append it could not roll back), or nil
// while it takes them.
func (j *File) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.broken
}

// Close releases the file and its lock.
func (j *File) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
