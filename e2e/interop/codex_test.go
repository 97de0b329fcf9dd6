package interop_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestCodex runs `codex exec` against the fake Responses API, with the router configured as
// its MCP server the way docs/unified-mcp-reference.md ("Connecting clients") says.
func TestCodex(t *testing.T) {
	t.Parallel()
	st := startStack(t)
	model := &responsesFake{script: &script{}, server: "hubu", tool: "generate_image"}
	api := serve(t, model)
	home := t.TempDir()
	codexHome := filepath.Join(home, ".codex")
	writeCodexConfig(t, codexHome, api.URL+"/v1", st)

	h := &harnessRuns{st: st, name: "codex", model: model.script, runOnce: func() string {
		return runHarness(t, home, []string{"CODEX_HOME=" + codexHome},
			filepath.Join(harnessBin, "codex"), "exec", "--skip-git-repo-check", "Draw a red fox in snow with Hubu.")
	}}
	args := `{"prompt":"a red fox in snow","model":"flux-dev","width":1024,"height":768}`
	first := h.requireNewCalls("call_", args, "callId", "accepted:codex")

	// The model repeats the first call's id in a new conversation (another threadId): the id
	// is bound to its conversation, so it is refused, never replayed, never charged.
	if o := h.call(first, args); o.Error.Code != "identity_conflict" || o.Replayed {
		t.Fatalf("the first id in a new conversation: %+v, want identity_conflict", o)
	}
	st.requireCharges(2)

	t.Logf("fake Responses API: %s", model.summary())
	st.requireNoSecrets(home, h.printed.String(), filepath.Join(".codex", "config.toml"))
	st.requireFixture(fixture{File: "08-interop-codex.jsonl", Client: "Codex CLI (codex exec)", Pkg: "@openai/codex",
		Note: "Measured by `make interop`: `codex exec` with the router as its stdio MCP server and a fake Responses API as the model. " +
			"`callId` is the model's tool-call id; `threadId` (equal to `sessionId`) names the conversation, and the router binds the call id to it: " +
			"the same id from another conversation is refused as identity_conflict."})
}

// writeCodexConfig writes CODEX_HOME/config.toml: the fake as the model provider, and the
// router as the MCP server "hubu" as the docs show it, plus what `codex exec` needs to call
// an MCP tool without asking (it cannot ask: nobody is there to approve).
func writeCodexConfig(t *testing.T, codexHome, baseURL string, st *interopStack) {
	t.Helper()
	path, args := st.routerCommand()
	// A JSON string is a TOML basic string, and a JSON array of them a TOML array, for these
	// (ASCII) values.
	q := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	config := fmt.Sprintf(`model = "interop-model"
model_provider = "interop"

[model_providers.interop]
name = "Hubu interop fake"
base_url = %s
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[mcp_servers.hubu]
command = %s
args = %s
env = { HUBU_AGENT_TOKEN = %s }
default_tools_approval_mode = "approve"
`, q(baseURL), q(path), q(args), q(st.s.Credentials.AgentToken))
	noError(t, os.MkdirAll(codexHome, 0o700))
	noError(t, os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o600))
}
