package journal

import (
	"path/filepath"
	"testing"
)

// A failed append that cannot be rolled back leaves the journal refusing every later append,
// and Err (what mockflux's /readyz reports) says so.
func TestErrAfterAnAppendThatCannotBeRolledBack(t *testing.T) {
	t.Parallel()
	j, _, err := Open(filepath.Join(t.TempDir(), "j.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Err(); err != nil {
		t.Fatalf("a new journal: %v", err)
	}
	if err := j.Append(map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	// With the file closed under it, the write fails and so does the truncation that would
	// roll it back.
	_ = j.f.Close()
	if err := j.Append(map[string]int{"n": 2}); err == nil {
		t.Fatal("an append to a closed file succeeded")
	}
	if j.Err() == nil {
		t.Fatal("Err is nil after an append that could not be rolled back")
	}
	if err := j.Append(map[string]int{"n": 3}); err == nil || err.Error() != j.Err().Error() {
		t.Fatalf("a later append: %v, want the journal's error %v", err, j.Err())
	}
}
