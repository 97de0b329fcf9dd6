package supportmatrix

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/router/identity"
	"hubu.dev/hubu/router/mcpserver"
)

const fixtures = "../testdata/meta"

func TestClassify(t *testing.T) {
	t.Parallel()
	for want, keys := range map[Class][]string{
		PerCallID: {"callId", "claudecode/toolUseId", "hubu.dev/platform-invocation"},
		CallLevel: {"itemId", "openai/request_id", "sessionId", "windowId", "progressToken", "x-codex-turn-metadata", "traceparent", "tracestate"},
		Context: {"openai/session", "threadId", "openai/subject", "openai/organization", "openai/userLocation", "openai/locale", "openai/userAgent", "timezone",
			"x-unknown/anything", "CallId", // keys are case-sensitive, as in identity.Normalize
			""},
	} {
		for _, key := range keys {
			if got := Classify(key); got != want {
				t.Errorf("Classify(%q) = %s, want %s", key, got, want)
			}
		}
	}
}

// TestClassesFollowIdentitySources keeps the per-call id class equal to identity.Sources, and the
// known-keys table free of sources and duplicates.
func TestClassesFollowIdentitySources(t *testing.T) {
	t.Parallel()
	for _, s := range identity.Sources {
		if Classify(s.Key) != PerCallID {
			t.Errorf("identity source %q is not classified as a per-call id", s.Key)
		}
	}
	seen := map[string]bool{}
	for _, k := range knownKeys {
		if isSourceKey(k.Key) || k.Class == PerCallID {
			t.Errorf("knownKeys lists %q as a per-call id: only identity.Sources may", k.Key)
		}
		if seen[k.Key] {
			t.Errorf("knownKeys lists %q twice", k.Key)
		}
		seen[k.Key] = true
		if k.Why == "" {
			t.Errorf("knownKeys: %q has no reason", k.Key)
		}
	}
}

func TestSortKeys(t *testing.T) {
	t.Parallel()
	keys := []string{"zeta", "timezone", "progressToken", "alpha", "hubu.dev/platform-invocation", "itemId", "callId", "openai/session"}
	sortKeys(keys)
	want := []string{"callId", "hubu.dev/platform-invocation", "itemId", "progressToken", "openai/session", "timezone", "alpha", "zeta"}
	if !slices.Equal(keys, want) {
		t.Errorf("sortKeys = %q, want %q", keys, want)
	}
}

const lineCodex = `{"time":"2026-01-05T10:00:00Z","tool":"capabilities","meta":[{"key":"callId","type":"string","length":28,"sha256_8":"361f4681"}],"verdict":"accepted:codex"}`

func TestRead(t *testing.T) {
	t.Parallel()
	slog := `{"time":"2026-01-05T10:00:00Z","level":"INFO","msg":"router ready","service":"hubu-unified-mcp"}`
	for _, tc := range []struct {
		name, file, in       string
		client, note, tested string
		auth                 string
		lines                []int // line numbers of the diagnose lines
		err                  string
	}{
		{name: "fixture", file: "a.jsonl", in: `{"client":"Codex (desktop)","note":"n"}` + "\n" + lineCodex + "\n\n" + lineCodex + "\n",
			client: "Codex (desktop)", note: "n", lines: []int{2, 4}},
		{name: "fixture measured here", file: "b.jsonl", in: `{"client":"Codex CLI","tested":"@openai/codex@0.171.0","auth":"stdio"}` + "\n" + lineCodex + "\n",
			client: "Codex CLI", tested: "@openai/codex@0.171.0", auth: "stdio", lines: []int{2}},
		{name: "tested on two lines", file: "x", in: `{"client":"C","tested":"a\nb"}` + "\n" + lineCodex, err: "x:1: client line: client must be non-empty"},
		{name: "auth on two lines", file: "x", in: `{"client":"C","auth":"a\rb"}` + "\n" + lineCodex, err: "x:1: client line: client must be non-empty"},
		{name: "plain log named by its file", file: "codex-2026-01-05.log", in: lineCodex + "\n",
			client: "codex-2026-01-05", lines: []int{1}},
		{name: "router stderr with slog lines", file: "stderr.txt", in: slog + "\n" + lineCodex + "\n" + slog,
			client: "stderr", lines: []int{2}},
		{name: "client line not first", file: "x", in: lineCodex + "\n" + `{"client":"C"}`, err: "x:2: a client line must be the file's first line"},
		{name: "empty client", file: "x", in: `{"client":" "}` + "\n" + lineCodex, err: "x:1: client line"},
		{name: "unknown header field", file: "x", in: `{"client":"C","version":2}` + "\n" + lineCodex, err: `x:1: client line: json: unknown field "version"`},
		{name: "not JSON", file: "x", in: "callId=abc\n", err: "x:1: not a JSON object"},
		{name: "unknown diagnose field", file: "x", in: `{"tool":"capabilities","meta":[],"verdict":"identity_required","raw":"v"}`, err: `x:1: not a diagnose line: json: unknown field "raw"`},
		{name: "unknown shape field", file: "x", in: `{"meta":[{"key":"callId","type":"string","length":29,"value":"call_Ab3dE5fG7hJ9kL1mN3pQ5rS7"}]}`, err: `unknown field "value"`},
		{name: "unknown type", file: "x", in: `{"meta":[{"key":"k","type":"unknown"}]}`, err: `x:1: _meta key "k": type "unknown"`},
		{name: "object members miscounted", file: "x", in: `{"meta":[{"key":"k","type":"object","length":2,"keys":["a"]}]}`, err: "an object of 2 members lists 1 member names"},
		{name: "duplicate member", file: "x", in: `{"meta":[{"key":"k","type":"object","length":2,"keys":["a","a"]}]}`, err: `member "a" appears twice`},
		{name: "duplicate key", file: "x", in: `{"meta":[{"key":"k","type":"null"},{"key":"k","type":"null"}]}`, err: `_meta key "k" appears twice`},
		{name: "number with a length", file: "x", in: `{"meta":[{"key":"k","type":"number","length":3}]}`, err: "a number has no length"},
		{name: "string with members", file: "x", in: `{"meta":[{"key":"k","type":"string","length":1,"keys":["a"]}]}`, err: "a string has no member names"},
		{name: "negative length", file: "x", in: `{"meta":[{"key":"k","type":"string","length":-1}]}`, err: "negative length"},
		{name: "trailing data", file: "x", in: lineCodex + " {}", err: "x:1: not a JSON object"},
		{name: "no diagnose lines", file: "x", in: `{"client":"C"}` + "\n" + slog, err: "x: no --diagnose-meta lines"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, err := Read(tc.file, strings.NewReader(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var numbers []int
			for _, l := range log.Lines {
				numbers = append(numbers, l.Number)
			}
			if log.Client != tc.client || log.Note != tc.note || log.Tested != tc.tested || log.Auth != tc.auth || log.File != tc.file || !slices.Equal(numbers, tc.lines) {
				t.Errorf("got client %q note %q tested %q auth %q file %q lines %v, want %q %q %q %q %q %v",
					log.Client, log.Note, log.Tested, log.Auth, log.File, numbers, tc.client, tc.note, tc.tested, tc.auth, tc.file, tc.lines)
			}
		})
	}
}

func str(key string, n int) mcpserver.MetaShape {
	return mcpserver.MetaShape{Key: key, Type: "string", Length: n}
}

func obj(key string, members ...string) mcpserver.MetaShape {
	return mcpserver.MetaShape{Key: key, Type: "object", Length: len(members), Keys: members}
}

func typ(key, t string) mcpserver.MetaShape {
	return mcpserver.MetaShape{Key: key, Type: t}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	env := identity.KeyPlatformInvocation
	for _, tc := range []struct {
		name     string
		meta     []mcpserver.MetaShape
		recorded string
		want     string
	}{
		{"codex", []mcpserver.MetaShape{str("callId", 28), typ("progressToken", "number")}, "", "accepted:codex"},
		{"codex, longest id", []mcpserver.MetaShape{str("callId", 256)}, "", "accepted:codex"},
		{"claude code", []mcpserver.MetaShape{str("claudecode/toolUseId", 30)}, "", "accepted:claude-code"},
		{"no _meta", nil, "", "identity_required"},
		{"progress token only", []mcpserver.MetaShape{typ("progressToken", "number")}, "", "identity_required"},
		{"request id and session are not identity", []mcpserver.MetaShape{str("openai/request_id", 36), str("openai/session", 34), str("sessionId", 36)}, "", "identity_required"},
		{"empty call id", []mcpserver.MetaShape{str("callId", 0)}, "", "identity_invalid"},
		{"call id of 15 characters", []mcpserver.MetaShape{str("callId", 15)}, "accepted:codex", "identity_invalid"},
		{"call id of 16 characters", []mcpserver.MetaShape{str("callId", 16)}, "", "accepted:codex"},
		{"tool use id of 15 characters", []mcpserver.MetaShape{str("claudecode/toolUseId", 15)}, "", "identity_invalid"},
		{"tool use id of 16 characters", []mcpserver.MetaShape{str("claudecode/toolUseId", 16)}, "", "accepted:claude-code"},
		{"call id too long", []mcpserver.MetaShape{str("callId", 257)}, "", "identity_invalid"},
		{"call id a number", []mcpserver.MetaShape{typ("callId", "number")}, "", "identity_invalid"},
		{"call id null", []mcpserver.MetaShape{typ("callId", "null")}, "", "identity_invalid"},
		{"two sources", []mcpserver.MetaShape{str("callId", 28), str("claudecode/toolUseId", 30)}, "", "identity_ambiguous"},
		{"envelope", []mcpserver.MetaShape{obj(env, "invocation_id", "platform", "version")}, "", "accepted:acme"},
		{"envelope on the recorded platform", []mcpserver.MetaShape{obj(env, "invocation_id", "platform", "version")}, "accepted:studio-7", "accepted:studio-7"},
		{"envelope, reserved platform recorded", []mcpserver.MetaShape{obj(env, "invocation_id", "platform", "version")}, "accepted:codex", "accepted:acme"},
		{"signed envelope", []mcpserver.MetaShape{obj(env, "invocation_id", "issued_at", "platform", "signature", "version")}, "", "accepted:acme"},
		{"envelope with issued_at", []mcpserver.MetaShape{obj(env, "invocation_id", "issued_at", "platform", "version")}, "", "accepted:acme"},
		{"signature without issued_at", []mcpserver.MetaShape{obj(env, "invocation_id", "platform", "signature", "version")}, "", "identity_invalid"},
		{"envelope without invocation_id", []mcpserver.MetaShape{obj(env, "platform", "version")}, "", "identity_invalid"},
		{"envelope without version", []mcpserver.MetaShape{obj(env, "invocation_id", "platform")}, "", "identity_invalid"},
		{"envelope with an unknown member", []mcpserver.MetaShape{obj(env, "invocation_id", "platform", "tenant", "version")}, "", "identity_invalid"},
		{"envelope as a string", []mcpserver.MetaShape{str(env, 40)}, "", "identity_invalid"},
		{"envelope and call id", []mcpserver.MetaShape{obj(env, "invocation_id", "platform", "version"), str("callId", 28)}, "", "identity_ambiguous"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Decide(mcpserver.DiagnoseLine{Meta: tc.meta, Verdict: tc.recorded}); got != tc.want {
				t.Errorf("Decide = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSynthesizeKeepsTheShape: the router's own Shape of a synthetic _meta is the recorded shape,
// digests aside, for every type.
func TestSynthesizeKeepsTheShape(t *testing.T) {
	t.Parallel()
	shapes := []mcpserver.MetaShape{
		str("callId", 28), str("empty", 0), typ("n", "number"), typ("b", "boolean"), typ("z", "null"),
		{Key: "arr", Type: "array", Length: 3}, obj("o", "a", "b"), obj("empty-object"),
		obj(identity.KeyPlatformInvocation, "invocation_id", "issued_at", "platform", "signature", "version"),
	}
	for _, log := range readFixtures(t) {
		for _, l := range log.Lines {
			shapes = append(shapes, l.Meta...)
		}
	}
	for _, s := range shapes {
		got := mcpserver.Shape(Synthesize([]mcpserver.MetaShape{s}, DefaultPlatform))
		if len(got) != 1 {
			t.Fatalf("Shape(Synthesize(%+v)) = %+v", s, got)
		}
		want := s
		want.SHA256 = got[0].SHA256 // the values are made up, so are the digests
		if !equalShape(got[0], want) {
			t.Errorf("Shape(Synthesize(%+v)) = %+v", s, got)
		}
	}
	// Synthetic strings are valid call ids.
	if v := Synthesize([]mcpserver.MetaShape{str("callId", 100)}, DefaultPlatform)["callId"].(string); strings.Trim(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") != "" || len(v) != 100 {
		t.Errorf("synthetic string %q", v)
	}
}

func equalShape(a, b mcpserver.MetaShape) bool {
	return a.Key == b.Key && a.Type == b.Type && a.Length == b.Length && a.SHA256 == b.SHA256 && slices.Equal(a.Keys, b.Keys)
}

func readFixtures(t *testing.T) []Log {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(fixtures, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in %s: %v", fixtures, err)
	}
	var logs []Log
	for _, f := range files {
		log, err := ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, log)
	}
	return logs
}

// TestFixtures pins every fixture's verdict to the router's real decision for its shape: change
// the identity rules and this test, the recorded verdicts and docs/support-matrix.md must change
// with them.
func TestFixtures(t *testing.T) {
	t.Parallel()
	// Reported fixtures record a read-only capabilities call; those measured by make interop
	// (e2e/interop writes them) record the harness's generate_image calls and name its version.
	// Auth is what the client's own documentation says (OAuth) or how make interop ran it
	// (stdio); see the matrix's preamble.
	const oauth, unverified = "OAuth (MCP authorization)", "not verified here"
	want := map[string]struct{ client, verdict, tool, auth string }{
		"01-codex-desktop.jsonl":       {"Codex (desktop)", "accepted:codex", "capabilities", oauth},
		"02-chatgpt-work.jsonl":        {"ChatGPT Work (phone)", "accepted:codex", "capabilities", oauth},
		"03-chatgpt-chat.jsonl":        {"ChatGPT chat (phone)", "identity_required", "capabilities", oauth},
		"04-claude-code.jsonl":         {"Claude Code", "accepted:claude-code", "capabilities", oauth},
		"05-vscode-copilot.jsonl":      {"VS Code (GitHub Copilot agent mode)", "identity_required", "capabilities", oauth},
		"06-mcp-inspector.jsonl":       {"MCP Inspector", "identity_required", "capabilities", oauth},
		"07-platform-envelope.jsonl":   {"Platform envelope (hubu.dev/platform-invocation, platform acme)", "accepted:acme", "capabilities", unverified},
		"08-interop-codex.jsonl":       {"Codex CLI (codex exec)", "accepted:codex", "generate_image", "stdio"},
		"09-interop-claude-code.jsonl": {"Claude Code (claude -p)", "accepted:claude-code", "generate_image", "stdio"},
	}
	logs := readFixtures(t)
	if len(logs) != len(want) {
		t.Errorf("%d fixtures, want %d: add new ones to this test", len(logs), len(want))
	}
	for _, log := range logs {
		w, ok := want[log.File]
		if !ok {
			t.Errorf("fixture %s is not in this test", log.File)
			continue
		}
		if log.Client != w.client {
			t.Errorf("%s: client %q, want %q", log.File, log.Client, w.client)
		}
		if log.Auth != w.auth {
			t.Errorf("%s: auth %q, want %q", log.File, log.Auth, w.auth)
		}
		if measured := w.tool == "generate_image"; measured != (log.Tested != "") {
			t.Errorf("%s: tested %q: a fixture is measured here (make interop, generate_image calls) exactly when it names the harness version", log.File, log.Tested)
		}
		raw, err := os.ReadFile(filepath.Join(fixtures, log.File))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
		for _, l := range log.Lines {
			// Exactly what mcpserver's diagnose writes: json.Marshal of a DiagnoseLine, in UTC.
			b, _ := json.Marshal(l.DiagnoseLine)
			if string(b) != lines[l.Number-1] {
				t.Errorf("%s:%d is not in the router's format:\n got %s\nwant %s", log.File, l.Number, lines[l.Number-1], b)
			}
			if l.Time.Location() != time.UTC || l.Tool != w.tool {
				t.Errorf("%s:%d: want a UTC time and tool %s, got %s %q", log.File, l.Number, w.tool, l.Time, l.Tool)
			}
			// The real decision: identity.Normalize on the synthetic _meta, as the router would run it.
			platform := EnvelopePlatform(l.Verdict)
			decided := "accepted:"
			if id, err := identity.Normalize(Synthesize(l.Meta, platform), SyntheticConfig(platform)); err != nil {
				decided, _ = identity.DescribeError(err)
			} else {
				decided += id.Platform
			}
			if decided != w.verdict || l.Verdict != w.verdict || Decide(l.DiagnoseLine) != decided {
				t.Errorf("%s:%d: recorded %q, router decides %q (Decide %q), want %q", log.File, l.Number, l.Verdict, decided, Decide(l.DiagnoseLine), w.verdict)
			}
		}
	}
	for _, r := range Build(logs) {
		if len(r.Disagreements) > 0 {
			t.Errorf("%s: %v", r.Client, r.Disagreements)
		}
	}
}

func TestBuild(t *testing.T) {
	t.Parallel()
	line := func(n int, verdict string, meta ...mcpserver.MetaShape) Line {
		return Line{Number: n, DiagnoseLine: mcpserver.DiagnoseLine{Tool: "capabilities", Meta: meta, Verdict: verdict}}
	}
	logs := []Log{
		{Client: "A", File: "a1.jsonl", Note: "first", Lines: []Line{
			line(2, "accepted:codex", str("openai/session", 3), str("callId", 29), typ("progressToken", "number")),
		}},
		{Client: "B", File: "b.log", Lines: []Line{
			line(1, "identity_required"),
			line(2, "accepted:codex", typ("progressToken", "number")), // recorded by another router: differs
			line(3, "identity_in_arguments"),                          // about the arguments: not compared
		}},
		{Client: "A", File: "a2.jsonl", Note: "first", Tested: "h@1", Auth: "stdio", Lines: []Line{
			line(2, "accepted:codex", str("callId", 29), str("traceparent", 55), str("zz", 1)),
		}},
	}
	rows := Build(logs)
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	a, b := rows[0], rows[1]
	if a.Client != "A" || !slices.Equal(a.Files, []string{"a1.jsonl", "a2.jsonl"}) || !slices.Equal(a.Notes, []string{"first"}) ||
		!slices.Equal(a.Tested, []string{"h@1"}) || !slices.Equal(a.Auth, []string{"stdio"}) ||
		!slices.Equal(a.PerCallID, []string{"callId"}) || !slices.Equal(a.CallLevel, []string{"progressToken", "traceparent"}) ||
		!slices.Equal(a.Context, []string{"openai/session", "zz"}) ||
		!slices.Equal(a.Verdicts, []VerdictCount{{"accepted:codex", 2}}) || len(a.Disagreements) != 0 {
		t.Errorf("row A = %+v", a)
	}
	wantDiff := []Disagreement{{File: "b.log", Line: 2, Recorded: "accepted:codex", Decided: "identity_required"}}
	if b.Client != "B" || len(b.PerCallID) != 0 || len(b.Tested) != 0 || len(b.Auth) != 0 || !slices.Equal(b.Verdicts, []VerdictCount{{"identity_required", 3}}) ||
		!slices.Equal(b.Disagreements, wantDiff) {
		t.Errorf("row B = %+v", b)
	}
}

func TestRender(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		rows []Row
		want []string // lines the output must contain
		not  []string
	}{
		{
			name: "accepted and rejected",
			rows: []Row{
				{Client: "Codex (desktop)", Auth: []string{"OAuth (MCP authorization)"}, PerCallID: []string{"callId"}, CallLevel: []string{"itemId", "progressToken"},
					Context: []string{"openai/session"}, Verdicts: []VerdictCount{{"accepted:codex", 1}}},
				{Client: "ChatGPT chat", Context: []string{"openai/session", "timezone"}, Verdicts: []VerdictCount{{"identity_required", 2}}},
				{Client: "Codex CLI", Auth: []string{"stdio", "not verified here"}, PerCallID: []string{"callId"}, Verdicts: []VerdictCount{{"accepted:codex", 3}},
					Tested: []string{"@openai/codex@0.171.0", "@openai/codex@0.172.0"}},
			},
			want: []string{
				"| Client | Auth | Per-call id key | Other call-level keys | Context keys | Hubu's verdict | Evidence |",
				"|---|---|---|---|---|---|---|",
				"| Codex (desktop) | OAuth (MCP authorization) | `callId` | `itemId`, `progressToken` | `openai/session` | accepted (codex) | reported |",
				"| ChatGPT chat | not recorded | none | none | `openai/session`, `timezone` | rejected: identity_required | reported |",
				"| Codex CLI | stdio; not verified here | `callId` | none | none | accepted (codex) | tested here: `@openai/codex@0.171.0`, `@openai/codex@0.172.0` (`make interop`) |",
				"```sh\n" + Regenerate + "\n```",
			},
			not: []string{"Notes:", "see below", "Recorded verdicts that differ"},
		},
		{
			name: "several verdicts, notes, disagreements, escaping",
			rows: []Row{{
				Client: "odd|name", Auth: []string{"x|y"}, Notes: []string{"a note\nwith a break"}, Context: []string{"a|b", "c`d"},
				Verdicts:      []VerdictCount{{"accepted:claude-code", 1}, {"identity_ambiguous", 2}},
				Disagreements: []Disagreement{{File: "x.log", Line: 7, Recorded: "accepted:codex", Decided: "identity_ambiguous"}},
			}},
			want: []string{
				"| odd\\|name | x\\|y | none | none | `a\\|b`, `c'd` | accepted (claude-code) (1 call); rejected: identity_ambiguous (2 calls) **(differs from the recorded verdict, see below)** | reported |",
				"- **odd\\|name**: a note with a break",
				"- **odd\\|name**, `x.log` line 7: the log recorded `accepted:codex`, the router now decides `identity_ambiguous`.",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Render(&buf, tc.rows); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("output has %q:\n%s", n, out)
				}
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"accepted:codex":    "accepted (codex)",
		"accepted:acme":     "accepted (acme)",
		"identity_required": "rejected: identity_required",
		"identity_invalid":  "rejected: identity_invalid",
	} {
		if got := Describe(in); got != want {
			t.Errorf("Describe(%q) = %q, want %q", in, got, want)
		}
	}
}
