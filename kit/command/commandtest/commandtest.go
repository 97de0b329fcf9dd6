// Package commandtest helps the tests of the binaries' mains; production code never imports it.
package commandtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

// RunFunc is a main's run.
type RunFunc = func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error

// Getenv reads variables from env ("KEY=value" entries) alone.
func Getenv(env []string) func(string) string {
	return func(k string) string {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				return v
			}
		}
		return ""
	}
}

// Run calls a main's run in the test's process with only the environment env, and returns
// what it printed.
func Run(run RunFunc, env []string, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = run(context.Background(), args, Getenv(env), &out, &errOut)
	return out.String(), errOut.String(), err
}

// Refuses checks that run with env and args fails with the error want (or, when want ends in
// ": ", with one that begins with it: a dependency's words follow), and that none of secrets
// shows in the error or in what run printed.
func Refuses(t testing.TB, run RunFunc, env, args []string, want string, secrets ...string) {
	t.Helper()
	out, errOut, err := Run(run, env, args...)
	if err == nil || err.Error() != want && !(strings.HasSuffix(want, ": ") && strings.HasPrefix(err.Error(), want)) {
		t.Errorf("%v %v: %v, want %q", env, args, err, want)
	}
	for _, s := range secrets {
		if strings.Contains(fmt.Sprint(err)+out+errOut, s) {
			t.Errorf("%v %v: %q is shown: %v\n%s%s", env, args, s, err, out, errOut)
		}
	}
}

// Start runs a server, run with env and args writing its JSON log to stderr, until it logs
// that it listens, and returns the address and a function that stops it. The test fails if the
// server stops with an error, or if its log shows one of the secrets given to stop.
func Start(t testing.TB, run RunFunc, env []string, args ...string) (addr string, stop func(secrets ...string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &jsonLog{listening: make(chan string, 1)}
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, Getenv(env), io.Discard, logs) }()
	select {
	case addr = <-logs.listening:
	case err := <-done:
		t.Fatalf("the server stopped before listening: %v\n%s", err, logs.String())
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatalf("the server did not listen within 20s: %v\n%s", <-done, logs.String())
	}
	return addr, func(secrets ...string) {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("the server stopped with an error: %v\n%s", err, logs.String())
		}
		for _, s := range secrets {
			if strings.Contains(logs.String(), s) {
				t.Fatalf("the server's log shows %q:\n%s", s, logs.String())
			}
		}
	}
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
