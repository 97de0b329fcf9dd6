// Package stack starts Hubu's whole stack — Postgres databases and migrations, mockflux,
// Gongbu, Hubu and the router — as real processes on loopback. The e2e suite and `make up`
// both use it.
package stack

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"sync"

	"hubu.dev/hubu/kit/proctest"
)

// Process is one service process: start, wait until healthy, stop (SIGTERM), kill
// (SIGKILL), restart. Its output (JSON logs) is appended to LogPath.
type Process = proctest.Process

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

// Bearer is an http.RoundTripper that sends every request with the token as its bearer
// credential, as an MCP client of the router's streamable HTTP does.
type Bearer string

func (b Bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// LogLines returns the JSON lines of a log file, for the suite's secret scan.
func LogLines(path string) ([]map[string]any, string, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out, string(raw), nil
}
