package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hubu.dev/hubu/router/supportmatrix"
)

// TestSupportMatrixDocIsCurrent regenerates docs/support-matrix.md in memory from the fixtures, as
// supportmatrix.Regenerate does, and fails when the committed file differs.
func TestSupportMatrixDocIsCurrent(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../testdata/meta/*.jsonl") // sorted, as the shell expands the glob
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), append([]string{"support-matrix"}, files...), func(string) string { return "" }, nil, &out, &errOut); err != nil {
		t.Fatalf("support-matrix: %v\n%s", err, errOut.String())
	}
	if errOut.Len() > 0 {
		t.Errorf("support-matrix warned about the fixtures:\n%s", errOut.String())
	}
	doc, err := os.ReadFile("../../../docs/support-matrix.md")
	if err != nil {
		t.Fatalf("docs/support-matrix.md: %v; from the repository root, run:\n\t%s", err, supportmatrix.Regenerate)
	}
	if !bytes.Equal(doc, out.Bytes()) {
		t.Fatalf("docs/support-matrix.md is stale; from the repository root, run:\n\t%s", supportmatrix.Regenerate)
	}
}

func TestSupportMatrixCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A router's stderr: slog lines and diagnose lines, one recorded by a router with other rules.
	plain := write("laptop-codex.log", strings.Join([]string{
		`{"time":"2026-01-05T10:00:00Z","level":"INFO","msg":"router ready","service":"hubu-unified-mcp"}`,
		`{"time":"2026-01-05T10:00:01Z","tool":"capabilities","meta":[{"key":"callId","type":"string","length":28,"sha256_8":"361f4681"},{"key":"progressToken","type":"number","length":0,"sha256_8":"6b86b273"}],"verdict":"accepted:codex"}`,
		`{"time":"2026-01-05T10:00:02Z","tool":"capabilities","meta":[{"key":"openai/request_id","type":"string","length":36,"sha256_8":"8e2f5309"}],"verdict":"accepted:codex"}`,
	}, "\n")+"\n")
	fixture := write("x.jsonl", `{"client":"Some client","auth":"stdio"}`+"\n"+
		`{"time":"2026-01-05T10:00:03Z","tool":"capabilities","meta":[],"verdict":"identity_required"}`+"\n")
	bad := write("bad.jsonl", `{"client":"C"}`+"\n"+`{"meta":[{"key":"callId","type":"string","length":29,"value":"call_Ab3dE5fG7hJ9kL1mN3pQ5rS7"}]}`+"\n")

	for _, tc := range []struct {
		name     string
		args     []string
		err      string
		out      []string
		stderr   []string
		noStderr bool
	}{
		{
			name: "plain log and fixture",
			args: []string{plain, fixture},
			out: []string{
				"| laptop-codex | not recorded | `callId` | `openai/request_id`, `progressToken` | none | accepted (codex) (1 call); rejected: identity_required (1 call) **(differs from the recorded verdict, see below)** |",
				"| Some client | stdio | none | none | none | rejected: identity_required |",
				"- **laptop-codex**, `laptop-codex.log` line 3: the log recorded `accepted:codex`, the router now decides `identity_required`.",
			},
			stderr: []string{`support-matrix: laptop-codex: laptop-codex.log:3: recorded "accepted:codex", the router decides "identity_required"`},
		},
		{name: "no files", args: nil, err: "support-matrix needs at least one --diagnose-meta log", stderr: []string{"usage: hubu-unified-mcp support-matrix FILE..."}},
		{name: "missing file", args: []string{filepath.Join(dir, "nope.log")}, err: "nope.log: no such file"},
		{name: "not a diagnose log", args: []string{fixture, bad}, err: `bad.jsonl:2: not a diagnose line: json: unknown field "value"`, noStderr: true},
		{name: "help", args: []string{"-h"}, err: "flag: help requested", stderr: []string{"usage: hubu-unified-mcp support-matrix FILE..."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), append([]string{"support-matrix"}, tc.args...), func(string) string { return "" }, nil, &out, &errOut)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
			for _, w := range tc.out {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tc.stderr {
				if !strings.Contains(errOut.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut.String())
				}
			}
			if tc.err != "" && out.Len() > 0 {
				t.Errorf("a failed run printed a table:\n%s", out.String())
			}
			if tc.noStderr && errOut.Len() > 0 {
				t.Errorf("stderr: %s", errOut.String())
			}
		})
	}
}
