package main

import (
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"hubu.dev/hubu/kit/proctest"
	"hubu.dev/hubu/router/routertest"
)

// The router that serves runs at gcPercent unless GOGC is set: its /metrics says which.
func TestServingRouterGCPercent(t *testing.T) {
	t.Parallel()
	b := routertest.New(t)
	for _, c := range []struct{ gogc, want string }{{"", strconv.Itoa(gcPercent)}, {"80", "80"}} {
		p := &proctest.Process{Name: "router", Path: binary, Args: []string{"--hubu-url", b.HubuURL, "--gongbu-url", b.GongbuURL,
			"--state", filepath.Join(t.TempDir(), "r.db"), "--http", "127.0.0.1:0"},
			Env: []string{"HUBU_AGENT_TOKEN=" + b.Token, "ROUTER_MCP_TOKEN=router-secret-token", "PATH=/usr/bin:/bin", "GOGC=" + c.gogc}}
		proctest.Start(t, p)
		resp, err := http.Get(p.URL() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if line := "\ngo_gc_gogc_percent " + c.want + "\n"; !strings.Contains(string(body), line) {
			t.Errorf("GOGC=%q: /metrics has no %q", c.gogc, strings.TrimSpace(line))
		}
		proctest.Stop(t, p)
	}
}
