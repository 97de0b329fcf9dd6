package interop_test

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestClaudeCode runs `claude -p` against the fake Messages API, with the router added as its
// MCP server by `claude mcp add`, as docs/unified-mcp-reference.md ("Connecting clients") says.
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
	runHarness(t, home, env, claude, append([]string{"mcp", "add", "hubu", "--env", "HUBU_AGENT_TOKEN=" + st.s.Credentials.AgentToken, "--", path}, args...)...)

	var printed strings.Builder
	run := func(callID, args string) toolOutcome {
		t.Helper()
		model.plan(callID, args)
		out := runHarness(t, home, env, claude, "-p", "Draw a red fox in snow with Hubu.", "--allowedTools", tool)
		printed.WriteString(out)
		raw := model.result(callID)
		if raw == "" {
			t.Fatalf("claude sent no result for call %s back to the model (fake: %s)\n%s", callID, model.summary(), out)
		}
		o, ok := outcome(raw)
		if !ok {
			t.Fatalf("call %s: no structured content in the tool result claude sent back: %s", callID, raw)
		}
		return o
	}

	fox := `{"prompt":"a red fox in snow","model":"flux-dev","width":1024,"height":768}`
	// A new call, under the id the fake issued: accepted as Claude Code's, charged once.
	first := newID("toolu_", 24)
	if o := run(first, fox); o.Status != "succeeded" || o.Replayed {
		t.Fatalf("first call: %+v, want succeeded and not replayed", o)
	}
	st.requireDiagnosed("claudecode/toolUseId", first, "accepted:claude-code")
	st.requireCharges(1)

	// The same prompt in a new run is a new call: a new charge.
	second := newID("toolu_", 24)
	if o := run(second, fox); o.Status != "succeeded" || o.Replayed {
		t.Fatalf("the same prompt in a new run: %+v, want succeeded and not replayed", o)
	}
	st.requireDiagnosed("claudecode/toolUseId", second, "accepted:claude-code")
	st.requireCharges(2)

	// Claude Code names no conversation beside the id, so the first id again in a new session,
	// with the same arguments, is a redelivery: the recorded answer, not charged again.
	if o := run(first, fox); o.Status != "succeeded" || !o.Replayed {
		t.Fatalf("the first id and arguments in a new session: %+v, want the recorded success, replayed", o)
	}
	st.requireCharges(2)

	// The first id with other arguments is refused: a call id is never reused for other work.
	owl := `{"prompt":"an owl at night","model":"flux-dev","width":1024,"height":768}`
	if o := run(first, owl); o.Error.Code != "call_reused_for_different_request" {
		t.Fatalf("the first id with other arguments: %+v, want call_reused_for_different_request", o)
	}
	st.requireCharges(2)

	t.Logf("fake Messages API: %s", model.summary())
	st.requireNoSecrets(home, printed.String(), ".claude.json")
	st.requireFixture(fixture{File: "09-interop-claude-code.jsonl", Client: "Claude Code (claude -p)", Pkg: "@anthropic-ai/claude-code",
		Note: "Measured by `make interop`: `claude -p --allowedTools mcp__hubu__generate_image` with the router added by `claude mcp add` and a fake Messages API as the model. " +
			"`claudecode/toolUseId` is the model's tool_use id; no conversation scope is sent, so the same id and arguments in a new session are a redelivery (replayed, not charged)."})
}
