package journal_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hubu.dev/hubu/services/mockflux/journal"
)

type entry struct {
	N int `json:"n"`
}

func decode(t *testing.T, lines []json.RawMessage) []int {
	t.Helper()
	var out []int
	for _, l := range lines {
		var e entry
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e.N)
	}
	return out
}

func TestAppendAndReplay(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	j, lines, err := journal.Open(path)
	if err != nil || len(lines) != 0 {
		t.Fatalf("open new: %v %v", lines, err)
	}
	for n := 1; n <= 3; n++ {
		if err := j.Append(entry{N: n}); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j, lines, err = journal.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if got := decode(t, lines); len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Fatalf("replayed %v", got)
	}
	if err := j.Append(entry{N: 4}); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	if string(raw) != "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n{\"n\":4}\n" {
		t.Fatalf("file: %q", raw)
	}
}

// A crash in the middle of an append leaves a last line without its newline. That append
// was never acknowledged, so it is dropped, and the next append starts on a clean line.
func TestTornLastLineIsDropped(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	if err := os.WriteFile(path, []byte("{\"n\":1}\n{\"n\":2"), 0o600); err != nil {
		t.Fatal(err)
	}
	j, lines, err := journal.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := decode(t, lines); len(got) != 1 || got[0] != 1 {
		t.Fatalf("replayed %v", got)
	}
	if err := j.Append(entry{N: 3}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	raw, _ := os.ReadFile(path)
	if string(raw) != "{\"n\":1}\n{\"n\":3}\n" {
		t.Fatalf("file: %q", raw)
	}
}

func TestCorruptLineIsRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	if err := os.WriteFile(path, []byte("{\"n\":1}\nnot json\n{\"n\":2}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := journal.Open(path); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("err = %v, want it to name line 2", err)
	}
}

func TestOneProcessAtATime(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	j, _, err := journal.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := journal.Open(path); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second open: %v", err)
	}
	j.Close()
	j, _, err = journal.Open(path)
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	j.Close()
}

func TestUnopenableFile(t *testing.T) {
	t.Parallel()
	if _, _, err := journal.Open(filepath.Join(t.TempDir(), "missing-dir", "journal.jsonl")); err == nil {
		t.Fatal("opened a file in a directory that does not exist")
	}
}
