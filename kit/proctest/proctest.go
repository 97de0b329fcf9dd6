// Package proctest runs the service binaries as child processes, as an operator would: build,
// start, wait until healthy, stop (SIGTERM), kill (SIGKILL), restart. The binaries' own tests
// and the e2e stack use it; production code never imports it.
package proctest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Build runs `go build -o out/` in dir with args (flags, then packages).
func Build(ctx context.Context, dir, out string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-o", out + string(filepath.Separator)}, args...)...)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v\n%s", err, b)
	}
	return nil
}

// RunWithBinary is a main package's TestMain: it builds the package in the working directory
// (the test's package directory) into a temporary directory, points *binary at it, runs the
// tests and removes it, and returns their exit code. A failed build panics, as there is no
// test yet to fail.
func RunWithBinary(m *testing.M, binary *string) int {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	dir, err := os.MkdirTemp("", filepath.Base(wd)+"-bin")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	if err := Build(context.Background(), ".", dir, "."); err != nil {
		panic("build " + filepath.Base(wd) + ": " + err.Error())
	}
	*binary = filepath.Join(dir, filepath.Base(wd))
	return m.Run()
}

// Process is one service binary run as a child process. Its stdout and stderr (JSON logs) are
// appended to LogPath.
type Process struct {
	Name    string
	Path    string
	Args    []string
	Env     []string
	LogPath string
	// Addr is the address it listens on (host:port): fixed before the start or, when empty,
	// read by WaitHealthy from the "listening" line of its log (it listens on port 0).
	Addr string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	err     error
	logFrom int64 // the log's size when the current run started
}

// URL is the process's base URL.
func (p *Process) URL() string { return "http://" + p.Addr }

// Start starts the process with extra environment entries on top of Env.
func (p *Process) Start(extraEnv ...string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && p.exited != nil {
		select {
		case <-p.exited:
		default:
			return fmt.Errorf("%s is already running", p.Name)
		}
	}
	logFile, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	info, err := logFile.Stat()
	if err != nil {
		logFile.Close()
		return err
	}
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Env = append(append([]string{}, p.Env...), extraEnv...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	p.cmd, p.exited, p.err, p.logFrom = cmd, make(chan struct{}), nil, info.Size()
	go func(exited chan struct{}) {
		err := cmd.Wait()
		logFile.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(exited)
	}(p.exited)
	return nil
}

// WaitHealthy polls /healthz until it answers 200, the process exits, or the timeout passes.
func (p *Process) WaitHealthy(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if p.Addr == "" {
			p.Addr, _ = p.Listening()["addr"].(string)
		}
		if p.Addr != "" {
			if resp, err := client.Get(p.URL() + "/healthz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
			}
		}
		select {
		case <-p.exitedChan():
			return fmt.Errorf("%s exited before it was healthy: %v%s (log: %s)", p.Name, p.exitErr(), p.lastWords(), p.LogPath)
		case <-ctx.Done():
			return fmt.Errorf("%s was not healthy within %s (log: %s)", p.Name, timeout, p.LogPath)
		case <-tick.C:
		}
	}
}

// Listening is the "listening" line the current run logged, or nil before it has.
func (p *Process) Listening() map[string]any {
	p.mu.Lock()
	from := p.logFrom
	p.mu.Unlock()
	log := p.Log()
	if int64(len(log)) < from {
		return nil
	}
	for line := range strings.SplitSeq(log[from:], "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "listening" {
			return rec
		}
	}
	return nil
}

// Log is everything the process logged, over all its runs.
func (p *Process) Log() string {
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}

// lastWords is ": " and the last line of the log, which says why a process that stopped at
// start stopped ("cannot listen on …", say), or nothing.
func (p *Process) lastWords() string {
	lines := strings.Split(strings.TrimSpace(p.Log()), "\n")
	if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
		return ": " + last
	}
	return ""
}

func (p *Process) exitedChan() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return p.exited
}

func (p *Process) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Running reports whether the process is alive.
func (p *Process) Running() bool {
	select {
	case <-p.exitedChan():
		return false
	default:
		return true
	}
}

// WaitExit waits for the process to end by itself (a failpoint's crash) and returns how it ended.
func (p *Process) WaitExit(timeout time.Duration) error {
	select {
	case <-p.exitedChan():
		return p.exitErr()
	case <-time.After(timeout):
		return fmt.Errorf("%s did not exit within %s", p.Name, timeout)
	}
}

// Stop sends SIGTERM and waits for a clean exit; after the timeout it kills.
func (p *Process) Stop(timeout time.Duration) error {
	if !p.Running() {
		return nil
	}
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exitedChan():
		return p.exitErr()
	case <-time.After(timeout):
		_ = p.Kill()
		return fmt.Errorf("%s did not stop within %s of SIGTERM; killed", p.Name, timeout)
	}
}

// Kill sends SIGKILL and waits.
func (p *Process) Kill() error {
	if !p.Running() {
		return nil
	}
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	_ = cmd.Process.Kill()
	<-p.exitedChan()
	return nil
}

// Restart stops (or kills, when kill is set) and starts the process again, then waits until healthy.
func (p *Process) Restart(ctx context.Context, kill bool, extraEnv ...string) error {
	if kill {
		_ = p.Kill()
	} else if err := p.Stop(15 * time.Second); err != nil {
		return err
	}
	if err := p.Start(extraEnv...); err != nil {
		return err
	}
	return p.WaitHealthy(ctx, 30*time.Second)
}

// Start starts p for a test, logging into the test's temporary directory unless p.LogPath is
// set, and waits until it is healthy; p is killed when the test ends.
func Start(t testing.TB, p *Process) {
	t.Helper()
	if p.LogPath == "" {
		p.LogPath = filepath.Join(t.TempDir(), p.Name+".log")
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	if err := p.WaitHealthy(context.Background(), 20*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, p.Log())
	}
}

// Stop stops p with SIGTERM and fails the test unless it exits cleanly within 20s, having
// logged that it shuts down (as kit/command's Serve does).
func Stop(t testing.TB, p *Process) {
	t.Helper()
	if err := p.Stop(20 * time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.Log())
	}
	if !strings.Contains(p.Log(), `"msg":"shutting down"`) {
		t.Fatalf("no shutdown line in the log: %s", p.Log())
	}
}
