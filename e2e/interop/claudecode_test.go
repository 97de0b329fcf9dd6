package interop_test

import (
	"path/filepath"
	"testing"
)

// TestClaudeCode runs `claude -p` against the fake Messages API, with the router added as its
// MCP server by `claude mcp add --scope user`, as docs/unified-mcp-reference.md ("Connecting clients") says.
func TestClaudeCode(t *testing.T) {
	t.Parallel()
	st := startStack(t)
	const tool = "mcp__hubu__generate_image"
	model := &messagesFake{script: &script{}, tool: tool}
	api := serve(t, model)
	home := t.TempDir()
	claude := filepath.Join(harnessBin, "claude")
	env := []string{
		"ANTHROPIC_BASE_URL=" + api.URL, "ANTHROPIC_API_KEY=sk-ant-interop-fake",
		// No telemetry, error reports or update checks: the fake is all there is to reach.
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}
	path, args := st.routerCommand()
	// Added as the docs say, for the user (--scope user), in one directory, and used from another:
	// without the scope, Claude Code keeps the server for the directory it was added in only.
	runHarnessIn(t, home, "setup", env, claude, append([]string{"mcp", "add", "--scope", "user", "hubu",
		"--env", "HUBU_AGENT_TOKEN=" + st.s.Credentials.AgentToken, "--", path}, args...)...)

	h := &harnessRuns{st: st, name: "claude", model: model.script, runOnce: func() string {
		return runHarness(t, home, env, claude, "-p", "Draw a red fox in snow with Hubu.", "--allowedTools", tool)
	}}
	fox := `{"prompt":"a red fox in snow","model":"flux-dev","width":1024,"height":768}`
	first := h.requireNewCalls("toolu_", fox, "claudecode/toolUseId", "accepted:claude-code")

	// Claude Code names no conversation beside the id, so the first id again in a new session,
	// with the same arguments, is a redelivery: the recorded answer, not charged again.
	if o := h.call(first, fox); o.Status != "succeeded" || !o.Replayed {
		t.Fatalf("the first id and arguments in a new session: %+v, want the recorded success, replayed", o)
	}
	st.requireCharges(2)

	// The first id with other arguments is refused: a call id is never reused for other work.
	owl := `{"prompt":"an owl at night","model":"flux-dev","width":1024,"height":768}`
	if o := h.call(first, owl); o.Error.Code != "call_reused_for_different_request" {
		t.Fatalf("the first id with other arguments: %+v, want call_reused_for_different_request", o)
	}
	st.requireCharges(2)

	t.Logf("fake Messages API: %s", model.summary())
	st.requireNoSecrets(home, h.printed.String(), ".claude.json")
	st.requireFixture(fixture{File: "09-interop-claude-code.jsonl", Client: "Claude Code (claude -p)", Pkg: "@anthropic-ai/claude-code",
		Note: "Measured by `make interop`: `claude -p --allowedTools mcp__hubu__generate_image` with the router added by `claude mcp add` and a fake Messages API as the model. " +
			"`claudecode/toolUseId` is the model's tool_use id; no conversation scope is sent, so the same id and arguments in a new session are a redelivery (replayed, not charged)."})
}
