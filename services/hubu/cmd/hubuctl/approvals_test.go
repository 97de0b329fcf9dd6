package main

import (
	"encoding/json"
	"strings"
	"testing"

	"hubu.dev/hubu/proto/hubuapi"
)

func TestApprovalsTable(t *testing.T) {
	t.Parallel()
	f := newFakeHubu(t)
	f.approvs = `{"operations":[` + operationJSON("pending_approval") + `]}`
	r := runCLI(t, f.env(), "approvals")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want a header and one row, got %q", r.stdout)
	}
	for _, want := range []string{"HANDLE", "AGENT", "MODEL", "SIZE", "AMOUNT", "PROMPT", "REQUESTED", "EXPIRES"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("header %q lacks %s", lines[0], want)
		}
	}
	// The prompt is model-written: no escape sequences or newlines, cut at 40 characters.
	for _, want := range []string{testHandle, testAgent, "flux-pro-1.1-ultra", "1024x768", "USD 0.06",
		"A lighthouse on a cliff at dawn, [2Jpai…", "2026-05-01 10:00:00Z", "2026-05-02 10:00:00Z"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("row %q lacks %q", lines[1], want)
		}
	}
	if strings.ContainsRune(r.stdout, 0x1b) {
		t.Errorf("output contains an escape character: %q", r.stdout)
	}
	// Columns line up: every header title starts where its cell does.
	if strings.Index(lines[0], "AMOUNT") != strings.Index(lines[1], "USD 0.06") {
		t.Errorf("columns are not aligned:\n%s", r.stdout)
	}

	f.approvs = `{"operations":[]}`
	if r := runCLI(t, f.env(), "approvals"); r.code != 0 || r.stdout != "No operations are waiting for approval.\n" {
		t.Fatalf("empty list: exit %d, stdout %q", r.code, r.stdout)
	}
}

func TestApprove(t *testing.T) {
	t.Parallel()
	f := newFakeHubu(t)
	r := runCLI(t, f.env(), "approve", testHandle)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if !strings.HasPrefix(r.stdout, "Approved "+testHandle+" (USD 0.06).") || !strings.Contains(r.stdout, "State") {
		t.Errorf("stdout = %q", r.stdout)
	}
	if strings.Contains(r.stdout+r.stderr, testToken) {
		t.Errorf("output shows the operator token")
	}
}

func TestDenySendsReason(t *testing.T) {
	t.Parallel()
	f := newFakeHubu(t)
	r := runCLI(t, f.env(), "deny", "--reason", "too expensive", testHandle)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "Denied "+testHandle) {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	var got hubuapi.DenyRequest
	if err := json.Unmarshal(f.body("POST /v1/operations/"+testHandle+"/deny"), &got); err != nil || got.Reason == nil || *got.Reason != "too expensive" {
		t.Fatalf("deny body = %s (%v)", f.body("POST /v1/operations/"+testHandle+"/deny"), err)
	}
}
