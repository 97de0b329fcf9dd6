package e2e_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	harness "hubu.dev/hubu/e2e/stack"
)

// The reference's curl example (docs/unified-mcp-reference.md, "Connecting clients") works as
// written against a stack started as make up starts it: a router without an identity config,
// which takes only the harnesses' keys. Run twice, it is one call: charged once, then replayed.
func TestDocsCurlExample(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is not on PATH: make test's scripts/ensure-test-tools.sh installs it or names it")
	}
	script := curlExample(t)
	server, id, dir, _ := stackPlace(t)
	su := startSuite(t, harness.Config{Dir: dir, ServerURL: server, HubuDB: "hubu_curl_" + id, GongbuDB: "gongbu_curl_" + id})
	envFile := filepath.Join(dir, "stack.env")
	noError(t, su.s.WriteEnvFile(envFile))
	script = strings.Replace(script, ". .hubu/stack.env", ". "+harness.ShellWord(envFile), 1)

	for i, want := range []bool{false, true} {
		cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+script)
		cmd.Dir, cmd.Env = dir, []string{"PATH=" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("delivery %d: the example failed: %v\n%s", i+1, err, out)
		}
		r := toolResult(t, string(out))
		if r["status"] != "succeeded" || r["replayed"] != want {
			t.Fatalf("delivery %d: status %v, replayed %v; want succeeded, replayed %v:\n%s", i+1, r["status"], r["replayed"], want, out)
		}
	}
	if n := su.charges().Count; n != 1 {
		t.Fatalf("the example's call, delivered twice, was charged %d times", n)
	}
}

// curlExample is the fenced block after the reference's curl example marker.
func curlExample(t *testing.T) string {
	t.Helper()
	b := string(must(os.ReadFile(filepath.Join("..", "docs", "unified-mcp-reference.md")))(t))
	_, rest, ok := strings.Cut(b, "<!-- curl example:")
	if !ok {
		t.Fatal("docs/unified-mcp-reference.md has no <!-- curl example: ... --> marker")
	}
	_, rest, _ = strings.Cut(rest, "```sh\n")
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("docs/unified-mcp-reference.md: the curl example's block has no end")
	}
	return block
}

// toolResult is the structured content of the tools/call answer (JSON-RPC id 2) among the
// server-sent events the example printed.
func toolResult(t *testing.T, out string) result {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		data, ok := strings.CutPrefix(strings.TrimSpace(l), "data: ")
		if !ok {
			continue
		}
		var msg struct {
			ID     int `json:"id"`
			Result struct {
				StructuredContent result `json:"structuredContent"`
			} `json:"result"`
		}
		if json.Unmarshal([]byte(data), &msg) == nil && msg.ID == 2 {
			return msg.Result.StructuredContent
		}
	}
	t.Fatalf("no answer to the tools/call in what the example printed:\n%s", out)
	return nil
}
