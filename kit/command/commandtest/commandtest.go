// Package commandtest helps the tests of the binaries' mains; production code never imports it.
package commandtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/kit/testlog"
)

// File writes content to a new file and returns its path.
func File(t testing.TB, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Run calls a main's run in the test's process with only the environment env ("KEY=value"
// entries), and returns what it printed.
func Run(run func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error,
	env []string, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = run(context.Background(), args, func(k string) string {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				return v
			}
		}
		return ""
	}, &out, &errOut)
	return out.String(), errOut.String(), err
}

// Start runs a server (a main's run writing its JSON log to stderr) until it logs that it
// listens, and returns the address and a function that stops it and returns its log and error.
func Start(t testing.TB, run func(ctx context.Context, stderr io.Writer) error) (addr string, stop func() (string, error)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &jsonLog{listening: make(chan string, 1)}
	done := make(chan error, 1)
	go func() { done <- run(ctx, logs) }()
	stop = func() (string, error) {
		cancel()
		err := <-done
		return logs.String(), err
	}
	select {
	case addr = <-logs.listening:
		return addr, stop
	case err := <-done:
		t.Fatalf("the server stopped before listening: %v\n%s", err, logs.String())
	case <-time.After(20 * time.Second):
		log, err := stop()
		t.Fatalf("the server did not listen within 20s: %v\n%s", err, log)
	}
	return "", nil
}

// jsonLog is a server's log; one Write is one JSON record, as slog writes them.
type jsonLog struct {
	testlog.Buffer
	listening chan string
}

func (l *jsonLog) Write(p []byte) (int, error) {
	var rec struct{ Msg, Addr string }
	if json.Unmarshal(p, &rec) == nil && rec.Msg == "listening" {
		select {
		case l.listening <- rec.Addr:
		default:
		}
	}
	return l.Buffer.Write(p)
}
