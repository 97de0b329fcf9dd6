// Package stack starts Hubu's whole stack — Postgres databases and migrations, mockflux,
// Gongbu, Hubu and the router — as real processes on loopback. The e2e suite and `make up`
// both use it.
package stack

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is one service process: start, wait until healthy, stop (SIGTERM), kill
// (SIGKILL), restart. Its stderr (JSON logs) is appended to LogPath.
type Process struct {
	Name    string
	Path    string
	Args    []string
	Env     []string
	LogPath string
	// Addr is the address it listens on (host:port), fixed before the start.
	Addr string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
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
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Env = append(append([]string{}, p.Env...), extraEnv...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	p.cmd, p.exited, p.err = cmd, make(chan struct{}), nil
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
		resp, err := client.Get(p.URL() + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.exitedChan():
			return fmt.Errorf("%s exited before it was healthy: %v%s (log: %s)", p.Name, p.exitErr(), lastWords(p.LogPath), p.LogPath)
		case <-ctx.Done():
			return fmt.Errorf("%s was not healthy within %s (log: %s)", p.Name, timeout, p.LogPath)
		case <-tick.C:
		}
	}
}

// lastWords is ": " and the last line of a log, which says why a process that stopped at
// start stopped ("cannot listen on …", say), or nothing.
func lastWords(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
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

// FreeAddr returns a loopback address with a port nobody listens on right now.
//
// It never returns one address twice in a process: stacks started side by side (the fault
// explorer's parallel runs) pick their ports before their processes bind them, and one stack
// must not bind, or talk to, a port another was given. The ports come from below the kernel's
// ephemeral range, which the many outgoing connections of parallel stacks would otherwise
// take between the pick and the bind.
func FreeAddr() (string, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 1000 {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+mathrand.IntN(12000))
		if handedOut.addrs[addr] {
			continue
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue // taken
		}
		ln.Close()
		handedOut.addrs[addr] = true
		return addr, nil
	}
	return "", errors.New("no free loopback port between 20000 and 32000")
}

var handedOut = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}

// LogLines returns the JSON lines of a log file, for the suite's secret scan.
func LogLines(path string) ([]map[string]any, string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	raw, err := io.ReadAll(f)
	if err != nil {
		return nil, "", err
	}
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out, string(raw), nil
}
