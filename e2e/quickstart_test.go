package e2e_test

// The first hour, as a newcomer meets it: `make up` in one terminal, then the README's
// quick-start lines pasted into an interactive bash and zsh in another, then the lines that
// `make up` and `make demo` print (the operator CLI, Claude Code's `claude mcp add`, Codex's
// config). Every line must work as written: the test runs them as they are, in a checkout of
// links with a bin/ and .hubu/ of its own, against databases of its own.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	harness "hubu.dev/hubu/e2e/stack"
	"hubu.dev/hubu/kit/testlog"
	"hubu.dev/hubu/sql/sqltest"
)

func TestQuickStart(t *testing.T) {
	t.Parallel()
	// macOS's shell is zsh, most Linux ones bash: the lines must work in both. make test's
	// scripts/ensure-test-tools.sh installs zsh where it is missing.
	if _, err := exec.LookPath("zsh"); err != nil {
		t.Fatal("zsh is not on PATH: make test's scripts/ensure-test-tools.sh installs it or names it")
	}
	for _, sh := range []string{"bash", "zsh"} {
		t.Run(sh, func(t *testing.T) {
			t.Parallel()
			quickStart(t, sh)
		})
	}
}

// readmeQuickStart is the fenced block after the README's quickstart marker.
func readmeQuickStart(t *testing.T, root string) []string {
	t.Helper()
	b := must(os.ReadFile(filepath.Join(root, "README.md")))(t)
	_, rest, ok := strings.Cut(string(b), "<!-- quickstart:")
	if !ok {
		t.Fatal("README.md has no <!-- quickstart: ... --> marker")
	}
	_, rest, _ = strings.Cut(rest, "```sh\n")
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("README.md: the quick-start block has no end")
	}
	return strings.Split(strings.TrimSpace(block), "\n")
}

var publicHandle = regexp.MustCompile(`hubu:public-operation:v1:[A-Za-z0-9_-]+`)

func quickStart(t *testing.T, shell string) {
	root := must(filepath.Abs(".."))(t)
	lines := readmeQuickStart(t, root)
	if lines[len(lines)-1] != "make down" {
		t.Fatalf("the README's quick start should end with make down: %q", lines)
	}

	// A checkout made of links to this one, with its own bin/ and .hubu/.
	work := t.TempDir()
	for _, e := range must(os.ReadDir(root))(t) {
		switch e.Name() {
		case ".git", ".hubu", "bin":
			continue
		}
		noError(t, os.Symlink(filepath.Join(root, e.Name()), filepath.Join(work, e.Name())))
	}

	// make up, in the first terminal.
	server := sqltest.ServerURL(t)
	name := "qs_" + shell + "_" + strings.ReplaceAll(fmt.Sprint(time.Now().UnixNano()%1e9), "-", "")
	t.Cleanup(func() { _ = harness.DropDatabases(context.Background(), server, "hubu_"+name, "gongbu_"+name) })
	// The environment of a person's terminal (HOME, Go's settings), without the test's own
	// settings, plus where this stack lives; the shell keeps no history.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "TEST_DATABASE_URL=") || strings.HasPrefix(kv, "HUBU_") || strings.HasPrefix(kv, "DATABASE_URL=")
	})
	env = append(env, "HISTFILE=/dev/null", "DATABASE_URL="+server, "HUBU_STACK_NAME="+name)
	for _, k := range []string{"HUBU_STACK_HUBU_ADDR", "HUBU_STACK_GONGBU_ADDR", "HUBU_STACK_MOCKFLUX_ADDR", "HUBU_STACK_ROUTER_ADDR"} {
		env = append(env, k+"="+must(harness.FreeAddr())(t))
	}
	up := exec.Command("make", "up")
	up.Dir, up.Env = work, env
	up.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var upOut testlog.Buffer
	up.Stdout, up.Stderr = &upOut, &upOut
	noError(t, up.Start())
	upDone := make(chan error, 1)
	go func() { upDone <- up.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-up.Process.Pid, syscall.SIGKILL)
		if t.Failed() {
			t.Logf("make up said:\n%s", upOut.String())
		}
	})
	for deadline := time.Now().Add(5 * time.Minute); !strings.Contains(upOut.String(), "The Hubu stack is up"); {
		select {
		case err := <-upDone:
			t.Fatalf("make up ended before the stack was up: %v\n%s", err, upOut.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("make up: the stack was not up within 5 minutes\n%s", upOut.String())
		}
	}
	banner := upOut.String()
	// The stack is named so that its databases are its own; its state is in .hubu/stacks/NAME/.
	place := must(harness.PlaceOf(work, name))(t)
	creds := readCredentials(t, filepath.Join(place.Dir, "credentials.json"))

	// The second terminal. A stub claude records what `claude mcp add` was given.
	stubs := t.TempDir()
	claudeArgs := filepath.Join(stubs, "claude-args")
	noError(t, os.WriteFile(filepath.Join(stubs, "claude"), []byte("#!/bin/sh\nprintf '%s\\n' \"$@\" > "+harness.ShellWord(claudeArgs)+"\n"), 0o755))
	term := startShell(t, shell, work, append(slices.Clone(env), "PATH="+stubs+":"+os.Getenv("PATH")))

	handle := ""
	for _, line := range lines {
		if line == "make down" {
			break // after the printed lines below
		}
		if strings.Contains(line, "hubu:public-operation:v1:...") {
			if handle == "" {
				t.Fatalf("README line %q needs a handle, and none was printed before it", line)
			}
			line = strings.ReplaceAll(line, "hubu:public-operation:v1:...", handle)
		}
		// The README shows the default stack; make demo and make down find the named one through
		// HUBU_STACK_NAME, and its env file is the one line that says where it lives.
		line = strings.ReplaceAll(line, ". .hubu/stack.env;", ". "+harness.ShellWord(must(filepath.Rel(work, place.EnvPath()))(t))+";")
		out := term.run(t, line)
		if h := publicHandle.FindString(out); h != "" && strings.HasPrefix(line, "make demo") {
			handle = h
		}
		if strings.Contains(line, "approve ") && !strings.Contains(out, "approved") {
			t.Errorf("README line %q did not approve: %s", line, out)
		}
		if strings.Contains(line, "RESUME=") && !strings.Contains(out, "succeeded") {
			t.Errorf("README line %q did not resume the approved spend: %s", line, out)
		}
	}

	// What make up printed: the operator CLI, Claude Code, Codex.
	printed := indentedCommands(banner)
	if len(printed) < 3 {
		t.Fatalf("make up printed no command lines to paste:\n%s", banner)
	}
	for _, line := range printed {
		term.run(t, line)
	}
	argv := readLines(t, claudeArgs)
	if len(argv) == 0 {
		t.Fatalf("make up printed no claude mcp add line:\n%s", banner)
	}
	want := []string{"mcp", "add", "--scope", "user", "hubu", "--env", "HUBU_AGENT_TOKEN=" + creds.AgentToken, "--"}
	if len(argv) <= len(want) || strings.Join(argv[:len(want)], "\n") != strings.Join(want, "\n") {
		t.Fatalf("claude mcp add was given %d arguments, not the agent's token and a router command", len(argv))
	}
	requireRouterWorks(t, argv[len(want):], creds.AgentToken)
	requireRouterWorks(t, codexCommand(t, banner), creds.AgentToken)

	// What make demo printed: approve its held spend from anywhere, and resume it.
	demo := term.run(t, "make demo")
	_, held, _ := strings.Cut(demo, "waits for a human")
	approve := indentedCommands(held)
	if len(approve) != 3 {
		t.Fatalf("make demo printed %d lines to approve and resume its held spend, want 3:\n%s", len(approve), demo)
	}
	for _, line := range approve {
		out := term.run(t, line)
		if strings.Contains(line, " approve ") && !strings.Contains(out, "approved") {
			t.Errorf("make demo's line %q did not approve: %s", line, out)
		}
		if strings.Contains(line, "RESUME=") && !strings.Contains(out, "succeeded") {
			t.Errorf("make demo's line %q did not resume the approved spend: %s", line, out)
		}
	}

	term.run(t, "make down")
	select {
	case err := <-upDone:
		if err != nil {
			t.Fatalf("make up did not stop cleanly after make down: %v\n%s", err, upOut.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("make up still runs a minute after make down")
	}
	if _, err := os.Stat(place.EnvPath()); !os.IsNotExist(err) {
		t.Errorf("%s is still there after the stack stopped", place.EnvPath())
	}
}

// indentedCommands are the command lines in printed text: lines indented by two spaces that
// start a shell command we print (not the TOML of Codex's config, nor the address table).
func indentedCommands(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "  ") {
			continue
		}
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "set -a;") || strings.HasPrefix(l, "claude ") || strings.Contains(l, "/hubuctl ") || strings.HasPrefix(l, "make demo") {
			out = append(out, l)
		}
	}
	return out
}

// codexCommand is the router command of the Codex config make up printed, with the agent's
// token where it says to put it.
func codexCommand(t *testing.T, banner string) []string {
	t.Helper()
	var command string
	var args []string
	for _, l := range strings.Split(banner, "\n") {
		for prefix, into := range map[string]any{"command = ": &command, "args = ": &args} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), prefix); ok {
				if err := json.Unmarshal([]byte(v), into); err != nil {
					t.Fatalf("Codex config: %s%s: %v", prefix, v, err)
				}
			}
		}
	}
	if command == "" {
		t.Fatalf("make up printed no Codex config:\n%s", banner)
	}
	return append([]string{command}, args...)
}

// requireRouterWorks starts argv as an MCP client would, with the agent's token, and reads
// the agent's capabilities through it.
func requireRouterWorks(t *testing.T, argv []string, token string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HUBU_AGENT_TOKEN=" + token}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "quickstart"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("%s: %v", argv[0], err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "capabilities", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("capabilities through the printed router command: %v %v", err, res)
	}
}

func readCredentials(t *testing.T, path string) harness.Credentials {
	t.Helper()
	var c harness.Credentials
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil || c.AgentToken == "" {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	noError(t, err)
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// interactiveShell is bash or zsh reading lines as if they were pasted into a terminal: it
// is started interactive (so zsh treats # as it does for a person, for one), without any rc
// file.
type interactiveShell struct {
	in  io.WriteCloser
	out *bufio.Reader
	seq int
}

func startShell(t *testing.T, name, dir string, env []string) *interactiveShell {
	t.Helper()
	args := map[string][]string{"bash": {"--noprofile", "--norc", "-i"}, "zsh": {"-f", "-i"}}[name]
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // no controlling terminal to take over
	in := must(cmd.StdinPipe())(t)
	pr, pw, err := os.Pipe()
	noError(t, err)
	cmd.Stdout, cmd.Stderr = pw, pw
	noError(t, cmd.Start())
	pw.Close()
	t.Cleanup(func() {
		in.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		pr.Close()
	})
	return &interactiveShell{in: in, out: bufio.NewReader(pr)}
}

// run sends one line, waits (bounded) until it finished, and fails the test unless it exited 0.
func (sh *interactiveShell) run(t *testing.T, line string) string {
	t.Helper()
	sh.seq++
	marker := fmt.Sprintf("quickstart-done-%d", sh.seq)
	if _, err := fmt.Fprintf(sh.in, "%s\nprintf '\\n%s %%d\\n' \"$?\"\n", line, marker); err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	type answer struct {
		out    string
		status string
		err    error
	}
	finished := regexp.MustCompile(regexp.QuoteMeta(marker) + ` (\d+)\s*$`)
	done := make(chan answer, 1)
	go func() {
		var b strings.Builder
		for {
			l, err := sh.out.ReadString('\n')
			// The marker with a number after it (bash echoes the printf line itself).
			if m := finished.FindStringSubmatchIndex(l); m != nil {
				b.WriteString(l[:m[0]])
				done <- answer{b.String(), l[m[2]:m[3]], nil}
				return
			}
			b.WriteString(l)
			if err != nil {
				done <- answer{b.String(), "", err}
				return
			}
		}
	}()
	select {
	case a := <-done:
		if a.err != nil || a.status != "0" {
			t.Fatalf("%q failed (exit status %q, %v):\n%s", line, a.status, a.err, a.out)
		}
		return a.out
	case <-time.After(3 * time.Minute):
		t.Fatalf("%q did not finish within 3 minutes", line)
		return ""
	}
}

// A port another process holds is refused before anything starts, naming the setting that moves
// it: otherwise that process would answer the new stack's health checks.
func TestStackRefusesATakenPort(t *testing.T) {
	t.Parallel()
	ln := must(net.Listen("tcp", "127.0.0.1:0"))(t)
	defer ln.Close()
	server, id, dir, _ := stackPlace(t)
	t.Cleanup(func() { _ = harness.DropDatabases(context.Background(), server, "hubu_port_"+id, "gongbu_port_"+id) })
	s, err := harness.Start(context.Background(), bin, harness.Config{Dir: dir, ServerURL: server,
		HubuDB: "hubu_port_" + id, GongbuDB: "gongbu_port_" + id, HubuAddr: ln.Addr().String()})
	if err == nil {
		s.Stop()
		t.Fatal("the stack started with Hubu's port taken")
	}
	if !strings.Contains(err.Error(), "is taken") || !strings.Contains(err.Error(), "HUBU_STACK_HUBU_ADDR") {
		t.Fatalf("the error does not say the port is taken and how to move it: %v", err)
	}
}
