package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hubu.dev/hubu/router/registry"
)

// runBackup runs the subcommand through the command's dispatch, and fails the test if what it
// printed (but the copy itself, on stdout with --to -) holds a key, a handle or a call id.
func (f *pruneFixture) runBackup(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = run(context.Background(), append([]string{"backup"}, args...), func(k string) string { return env[k] }, nil, &out, &errOut)
	printed := errOut.String()
	if !strings.Contains(strings.Join(args, " "), "--to -") {
		printed += out.String()
	}
	if err != nil {
		printed += err.Error()
	}
	for _, s := range append(f.secrets, "secret") {
		if strings.Contains(printed, s) {
			t.Fatalf("backup %v printed a key, handle, call id or password:\n%s", args, printed)
		}
	}
	return out.String(), errOut.String(), err
}

func TestBackupCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := newPruneFixture(t, filepath.Join(dir, "state", "router.db"))
	existing := filepath.Join(dir, "existing.db")
	if err := os.WriteFile(existing, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(dir, "router-backup.db")

	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--state", f.state}, nil, "needs --to FILE"},
		{[]string{"--state", f.state, "--to", existing}, nil, "does not exist yet"},
		{[]string{"--state", filepath.Join(dir, "missing.db"), "--to", to}, nil, "no such file"},
		{[]string{"--state", f.state, "--to", to, "extra"}, nil, "unexpected argument"},
		{[]string{"--to", to}, map[string]string{"ROUTER_STATE": "postgres://router:secret@127.0.0.1/router"}, "pg_dump"},
		{[]string{"--state", "host=127.0.0.1 password=secret", "--to", to}, nil, "keyword=value"},
	} {
		if _, _, err := f.runBackup(t, c.env, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
	if data, _ := os.ReadFile(existing); string(data) != "keep me" {
		t.Fatal("a refused backup wrote over an existing file")
	}
	for _, p := range []string{to, filepath.Join(dir, "missing.db")} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a refused backup made %s: %v", p, err)
		}
	}

	// To a file; the registry comes from ROUTER_STATE, as the router's does.
	out, _, err := f.runBackup(t, map[string]string{"ROUTER_STATE": f.state}, "--to", to)
	if err != nil || !strings.HasPrefix(out, "backed up 5 calls (1 not final) to "+to+": ") ||
		!strings.HasSuffix(out, " bytes, integrity_check ok\n") || strings.Count(out, "\n") != 1 {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	checkBackupCopy(t, f, to)
	if _, _, err := f.runBackup(t, nil, "--state", f.state, "--to", to); err == nil {
		t.Fatal("a backup wrote over the previous one")
	}

	// To stdout: the copy itself, and the line on stderr.
	copied, line, err := f.runBackup(t, nil, "--state", f.state, "--to", "-")
	if err != nil || !strings.HasPrefix(line, "backed up 5 calls (1 not final) to stdout: ") {
		t.Fatalf("backup --to -: %v\n%s", err, line)
	}
	streamed := filepath.Join(dir, "streamed.db")
	if err := os.WriteFile(streamed, []byte(copied), 0o600); err != nil {
		t.Fatal(err)
	}
	checkBackupCopy(t, f, streamed)
}

// checkBackupCopy checks that the copy at path is the fixture's registry: its installation,
// and each call's keys.
func checkBackupCopy(t *testing.T, f *pruneFixture, path string) {
	t.Helper()
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the backup %s: %v %v", path, st, err)
	}
	live, err := registry.Open(context.Background(), f.state, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := live.InstallationID()
	live.Close()
	restored, err := registry.Open(context.Background(), path, &registry.Options{FinalsBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close()
	if restored.InstallationID() != id {
		t.Fatalf("the backup %s has another installation id", path)
	}
	for i, c := range f.old {
		if e, res, err := restored.Resolve(context.Background(), c); err != nil || res != registry.Replay || e.OperationKey != f.entries[i].OperationKey {
			t.Fatalf("a call in the backup %s: %v %v", path, res, err)
		}
	}
}

// --to - refuses a terminal: the copy holds private operation keys. The null device and a
// file are no terminal.
func TestBackupToATerminal(t *testing.T) {
	t.Parallel()
	for _, name := range []string{os.DevNull, filepath.Join(t.TempDir(), "file")} {
		w, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if isTerminal(w) {
			t.Errorf("%s is taken for a terminal", name)
		}
		w.Close()
	}
	tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no terminal to try: %v", err)
	}
	defer tty.Close()
	state := filepath.Join(t.TempDir(), "router.db")
	err = run(context.Background(), []string{"backup", "--state", state, "--to", "-"}, func(string) string { return "" }, nil, tty, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "a terminal") {
		t.Fatalf("backup --to - to a terminal: %v", err)
	}
}

func TestBackupHelp(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"backup", "--help"}, func(string) string { return "" }, nil, &stdout, &stderr)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	for _, want := range []string{"VACUUM INTO", "integrity_check", "pg_dump", "--to -", "docker compose exec -T", "-wal"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the help does not say %q:\n%s", want, stderr.String())
		}
	}
}
