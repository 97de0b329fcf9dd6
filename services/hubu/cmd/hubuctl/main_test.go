package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"hubu.dev/hubu/proto/hubuapi"
)

const (
	testToken  = "op-secret-token-123"
	testHandle = "hubu:public-operation:v1:11111111-2222-4333-8444-555555555555"
	testAgent  = "0b7f5f2e-3c1a-4f4e-9a57-1f0d2b9c8e11"
	testInvite = "hubu_inv_0123456789abcdefghijklmnopqrstuv"
)

type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs hubuctl in-process with only the given environment.
func runCLI(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, func(k string) string { return env[k] }, &stdout, &stderr)
	return result{code: code(err), stdout: stdout.String(), stderr: stderr.String()}
}

// requireOneErrorLine checks the contract for failures: one line on stderr, nothing on stdout.
func requireOneErrorLine(t *testing.T, r result, wantCode int, wantSubstr string) {
	t.Helper()
	if r.code != wantCode {
		t.Fatalf("exit code = %d, want %d (stderr %q)", r.code, wantCode, r.stderr)
	}
	if !strings.HasPrefix(r.stderr, "hubuctl: ") || strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") {
		t.Fatalf("stderr = %q, want one line starting with \"hubuctl: \"", r.stderr)
	}
	if !strings.Contains(r.stderr, wantSubstr) {
		t.Fatalf("stderr = %q, want it to contain %q", r.stderr, wantSubstr)
	}
	if r.stdout != "" {
		t.Fatalf("stdout = %q, want nothing", r.stdout)
	}
}

func TestSettingsErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"missing url", map[string]string{"HUBU_APPROVER_TOKEN": testToken}, []string{"approvals"}, "HUBU_URL (or --url) is required"},
		{"missing token", map[string]string{"HUBU_URL": "http://127.0.0.1:1"}, []string{"approvals"}, "HUBU_APPROVER_TOKEN (or --token) is required"},
		{"bad scheme", map[string]string{"HUBU_URL": "ftp://x", "HUBU_APPROVER_TOKEN": testToken}, []string{"approvals"}, "must be an http:// or https:// URL"},
		{"no host", map[string]string{"HUBU_URL": "127.0.0.1:8081", "HUBU_APPROVER_TOKEN": testToken}, []string{"approvals"}, "must be an http:// or https:// URL"},
		{"flag overrides env", map[string]string{"HUBU_URL": "http://127.0.0.1:1", "HUBU_APPROVER_TOKEN": testToken}, []string{"approvals", "--url", "nope"}, "must be an http:// or https:// URL"},
		{"token from flag, url missing", nil, []string{"--token", testToken, "approvals"}, "HUBU_URL (or --url) is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, tc.env, tc.args...)
			requireOneErrorLine(t, r, 2, tc.want)
			if strings.Contains(r.stderr, testToken) {
				t.Fatalf("stderr shows the token: %q", r.stderr)
			}
		})
	}
}

// The token may come from a file (HUBU_APPROVER_TOKEN_FILE), so it need not sit in an
// environment that other tools print; a file and the variable together are refused.
func TestTokenFromFile(t *testing.T) {
	t.Parallel()
	f := newFakeHubu(t)
	f.approvs = `{"operations":[]}`
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := f.env()
	delete(env, "HUBU_APPROVER_TOKEN")
	env["HUBU_APPROVER_TOKEN_FILE"] = file
	if r := runCLI(t, env, "approvals"); r.code != 0 {
		t.Fatalf("token from a file: exit %d, stderr %q", r.code, r.stderr)
	}
	env["HUBU_APPROVER_TOKEN"] = testToken
	requireOneErrorLine(t, runCLI(t, env, "approvals"), 2, "HUBU_APPROVER_TOKEN and HUBU_APPROVER_TOKEN_FILE are both set")
	delete(env, "HUBU_APPROVER_TOKEN")
	env["HUBU_APPROVER_TOKEN_FILE"] = file + ".missing"
	requireOneErrorLine(t, runCLI(t, env, "approvals"), 2, "HUBU_APPROVER_TOKEN_FILE: open ")
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	env := map[string]string{"HUBU_URL": "http://127.0.0.1:1", "HUBU_APPROVER_TOKEN": testToken}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "missing command"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"agent"}, "missing agent command"},
		{[]string{"agent", "delete"}, `unknown command "agent delete"`},
		{[]string{"approve"}, "needs one public handle"},
		{[]string{"approve", testHandle, testHandle}, "needs one public handle"},
		{[]string{"approve", "hubu:operation:v1:codex:11111111-2222-4333-8444-555555555555"}, "is not a public handle"},
		{[]string{"deny", testHandle, "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"deny", testHandle, "--reason", strings.Repeat("x", 501)}, "at most 500 characters"},
		{[]string{"approvals", "extra"}, `unexpected argument "extra"`},
		{[]string{"agent", "show", "not-a-uuid"}, "is not an agent ID"},
		{[]string{"agent", "create"}, "--name is required"},
		{[]string{"agent", "create", "--name", "a", "--period", "year"}, "--period must be day, week or month"},
		{[]string{"agent", "create", "--name", "a", "--budget-micros", "-1"}, "--budget-micros must not be negative"},
		{[]string{"agent", "create", "--name", "a", "--ceiling-micros", "1.5"}, "invalid value"},
		{[]string{"agent", "set-policy", testAgent}, "give at least one policy flag"},
		{[]string{"agent", "set-account", testAgent}, "needs an agent ID and an account"},
		{[]string{"agent", "create", "--name", "a", "--email", "not-an-address"}, `"not-an-address" is not an email address`},
		{[]string{"agent", "set-email", testAgent}, "needs an agent ID and an email (or --clear)"},
		{[]string{"agent", "set-email", testAgent, "a@example.com", "--clear"}, "give an email or --clear, not both"},
		{[]string{"agent", "set-email", testAgent, "a@example.com", "b@example.com"}, "needs an agent ID and an email (or --clear)"},
		{[]string{"agent", "set-email", testAgent, "alice at example.com"}, "is not an email address"},
		{[]string{"agent", "set-email", "painter", "a@example.com"}, `"painter" is not an agent ID (a UUID; see hubuctl agent list)`},
		{[]string{"agent", "invite"}, "needs one agent ID"},
		{[]string{"agent", "invite", "painter"}, "is not an agent ID"},
		{[]string{"agent", "invite", testAgent, "--ttl", "59s"}, "--ttl must be whole seconds from 1m to 168h"},
		{[]string{"agent", "invite", testAgent, "--ttl", "169h"}, "--ttl must be whole seconds from 1m to 168h"},
		{[]string{"agent", "invite", testAgent, "--ttl", "90500ms"}, "--ttl must be whole seconds"},
		{[]string{"agent", "invite", testAgent, "--ttl", "a day"}, "invalid value"},
		{[]string{"prices", "set", "--provider", "bfl", "--model", "flux-dev", "--size", "*"}, "--amount-micros is required"},
		{[]string{"operation"}, "missing operation command"},
		{[]string{"credentials"}, "missing credentials command"},
		{[]string{"credentials", "delete", testAgent}, `unknown command "credentials delete"`},
		{[]string{"credentials", "revoke"}, "needs one credential ID"},
		{[]string{"credentials", "revoke", "not-an-id"}, `"not-an-id" is not a credential ID`},
		{[]string{"credentials", "rotate", testAgent, "--overlap", "25h"}, "--overlap must be whole seconds between 0s and 24h0m0s"},
		{[]string{"credentials", "rotate", testAgent, "--overlap", "-1s"}, "--overlap must be whole seconds"},
		{[]string{"credentials", "rotate", testAgent, "--overlap", "1500ms"}, "--overlap must be whole seconds"},
		{[]string{"credentials", "rotate", testAgent, "--overlap", "ten"}, "invalid value"},
		{[]string{"credentials", "list", "extra"}, `unexpected argument "extra"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			requireOneErrorLine(t, runCLI(t, env, tc.args...), 2, tc.want)
		})
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	// No settings: --help must work without them and print to stdout.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--help"}, "usage: hubuctl [--url URL]"},
		{[]string{"-h"}, "usage: hubuctl [--url URL]"},
		{[]string{"help"}, "usage: hubuctl [--url URL]"},
		{[]string{"help", "approve"}, "usage: hubuctl approve HANDLE"},
		{[]string{"agent", "--help"}, "hubuctl agent set-account ID ACCOUNT"},
		{[]string{"agent", "help", "create"}, "usage: hubuctl agent create"},
		{[]string{"agent", "create", "--help"}, "--auto-approve-micros N"},
		{[]string{"agent", "set-policy", "--help"}, "--period day|week|month"},
		{[]string{"agent", "list", "--help"}, "usage: hubuctl agent list"},
		{[]string{"agent", "show", "--help"}, "usage: hubuctl agent show ID"},
		{[]string{"agent", "set-account", "--help"}, "usage: hubuctl agent set-account"},
		{[]string{"agent", "set-email", "--help"}, "--clear"},
		{[]string{"agent", "invite", "--help"}, "usage: hubuctl agent invite ID [--ttl DURATION] [--json]"},
		{[]string{"agent", "create", "--help"}, "--email EMAIL"},
		{[]string{"--help"}, "agent invite ID [--ttl D]"},
		{[]string{"prices", "--help"}, "hubuctl prices set"},
		{[]string{"prices", "list", "--help"}, "usage: hubuctl prices list"},
		{[]string{"prices", "set", "--help"}, "--amount-micros N"},
		{[]string{"approvals", "--help"}, "usage: hubuctl approvals"},
		{[]string{"approve", "--help"}, "usage: hubuctl approve HANDLE"},
		{[]string{"deny", "x", "--help"}, "--reason TEXT"},
		{[]string{"operation", "show", "--help"}, "usage: hubuctl operation show HANDLE"},
		{[]string{"ledger", "--help"}, "usage: hubuctl ledger HANDLE"},
		{[]string{"--help"}, "credentials rotate ID [--overlap D]"},
		{[]string{"credentials", "--help"}, "hubuctl credentials rotate ID [--overlap DURATION]"},
		{[]string{"credentials", "list", "--help"}, "usage: hubuctl credentials list"},
		{[]string{"credentials", "revoke", "--help"}, "credential_revoked"},
		{[]string{"credentials", "rotate", "--help"}, "--overlap DURATION"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, nil, tc.args...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("exit %d, stderr %q; want 0 and nothing", r.code, r.stderr)
			}
			if !strings.Contains(r.stdout, tc.want) {
				t.Fatalf("stdout = %q, want it to contain %q", r.stdout, tc.want)
			}
		})
	}
}

// fakeHubu answers a few operator routes with canned JSON and records what it was sent.
type fakeHubu struct {
	srv     *httptest.Server
	mu      sync.Mutex
	bodies  map[string][]byte // "METHOD path" -> last request body
	approvs string
}

func newFakeHubu(t *testing.T) *fakeHubu {
	f := &fakeHubu{bodies: map[string][]byte{}}
	mux := http.NewServeMux()
	problem := func(w http.ResponseWriter, status int, code, detail string) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"type": "https://hubu.dev/problems/" + code, "title": http.StatusText(status), "status": status, "code": code, "detail": detail,
		})
	}
	ok := func(w http.ResponseWriter, status int, body string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
	mux.HandleFunc("GET /v1/approvals", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testToken {
			problem(w, 401, "unauthorized", "a valid bearer token is required")
			return
		}
		ok(w, 200, f.approvs)
	})
	mux.HandleFunc("POST /v1/operations/{handle}/approve", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("handle") != testHandle {
			problem(w, 409, "conflict", "the operation is denied, not pending approval")
			return
		}
		ok(w, 200, operationJSON("approved"))
	})
	mux.HandleFunc("POST /v1/operations/{handle}/deny", func(w http.ResponseWriter, r *http.Request) {
		ok(w, 200, operationJSON("denied"))
	})
	mux.HandleFunc("GET /v1/agents/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != testAgent {
			problem(w, 404, "not_found", "no such agent")
			return
		}
		ok(w, 200, agentJSON)
	})
	mux.HandleFunc("PUT /v1/agents/{id}/policy", func(w http.ResponseWriter, r *http.Request) {
		ok(w, 200, agentJSON)
	})
	mux.HandleFunc("POST /v1/agents", func(w http.ResponseWriter, r *http.Request) {
		ok(w, 201, `{"agent":`+agentJSON+`,"token":"agent-token-xyz"}`)
	})
	mux.HandleFunc("PUT /v1/agents/{id}/owner", func(w http.ResponseWriter, r *http.Request) {
		var body hubuapi.OwnerUpdate
		_ = json.NewDecoder(r.Body).Decode(&body)
		switch body.Email {
		case "taken@example.com":
			problem(w, 409, "conflict", "another agent already belongs to taken@example.com")
		case "":
			ok(w, 200, agentJSON)
		default:
			ok(w, 200, strings.TrimSuffix(agentJSON, "}")+`,"owner_email":"`+body.Email+`"}`)
		}
	})
	mux.HandleFunc("POST /v1/agents/{id}/invites", func(w http.ResponseWriter, r *http.Request) {
		ok(w, 201, `{"code":"`+testInvite+`","agent_id":"`+r.PathValue("id")+`","expires_at":"2026-05-02T09:00:00Z"}`)
	})
	mux.HandleFunc("GET /v1/prices", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, "<html>bad gateway</html>")
	})
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Authorization"); got != "Bearer "+testToken {
			problem(w, 401, "unauthorized", "a bearer token is required")
			return
		}
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.bodies[r.Method+" "+r.URL.Path] = body
		f.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeHubu) env() map[string]string {
	return map[string]string{"HUBU_URL": f.srv.URL, "HUBU_APPROVER_TOKEN": testToken}
}

func (f *fakeHubu) body(key string) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[key]
}

func operationJSON(state string) string {
	return `{"public_handle":"` + testHandle + `","agent_id":"` + testAgent + `","tool":"generate_image","state":"` + state + `",
	"amount_micros":60000,"currency":"USD","account":"acct:demo","scope":{"provider":"bfl","model":"flux-pro-1.1-ultra","size":"1024x768"},
	"arguments":{"prompt":"A lighthouse\non a cliff at dawn, \u001b[2Jpainted in oils with thick strokes","model":"flux-pro-1.1-ultra","width":1024,"height":768},
	"request_hash":"` + strings.Repeat("ab", 32) + `","approval_expires_at":"2026-05-02T10:00:00Z",
	"held_micros":60000,"captured_micros":0,"released_micros":0,"created_at":"2026-05-01T10:00:00Z","updated_at":"2026-05-01T10:00:00Z"}`
}

const agentJSON = `{"id":"` + testAgent + `","name":"demo","account":"acct:demo","created_at":"2026-05-01T09:00:00Z",
	"policy":{"currency":"USD","per_operation_ceiling_micros":2000000,"auto_approve_limit_micros":100000,"budget_micros":9000000,
	"budget_period":"week","allowed_providers":["bfl"],"allowed_models":["flux-dev","flux-schnell"]}}`

func TestJSONOutput(t *testing.T) {
	t.Parallel()
	f := newFakeHubu(t)
	f.approvs = `{"operations":[` + operationJSON("pending_approval") + `]}`
	for _, args := range [][]string{{"--json", "approvals"}, {"approvals", "--json"}} {
		r := runCLI(t, f.env(), args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
		var got hubuapi.OperationList
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got.Operations) != 1 || got.Operations[0].PublicHandle != testHandle {
			t.Fatalf("%v: stdout is not the API's list: %v\n%s", args, err, r.stdout)
		}
		if !strings.Contains(r.stdout, "\n  \"operations\": [") {
			t.Errorf("%v: JSON is not indented:\n%s", args, r.stdout)
		}
	}
}

func TestAPIErrorLine(t *testing.T) {
	t.Parallel()
	f := newFakeHubu(t)
	other := "hubu:public-operation:v1:99999999-2222-4333-8444-555555555555"
	r := runCLI(t, f.env(), "approve", other)
	requireOneErrorLine(t, r, 1, "")
	if want := "hubuctl: conflict: the operation is denied, not pending approval\n"; r.stderr != want {
		t.Errorf("stderr = %q, want %q", r.stderr, want)
	}

	r = runCLI(t, map[string]string{"HUBU_URL": f.srv.URL, "HUBU_APPROVER_TOKEN": "wrong-token"}, "approvals")
	requireOneErrorLine(t, r, 1, "hubuctl: unauthorized: a bearer token is required")
	if strings.Contains(r.stderr, "wrong-token") {
		t.Errorf("stderr shows the token: %q", r.stderr)
	}

	// A status the spec does not list for the route and a body that is no problem.
	requireOneErrorLine(t, runCLI(t, f.env(), "prices", "list"), 1, "unexpected response from Hubu: 502 Bad Gateway")
	requireOneErrorLine(t, runCLI(t, f.env(), "agent", "show", "00000000-0000-4000-8000-000000000000"), 1, "hubuctl: not_found: no such agent")
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // nothing listens there any more
	r := runCLI(t, map[string]string{"HUBU_URL": srv.URL, "HUBU_APPROVER_TOKEN": testToken}, "approvals")
	requireOneErrorLine(t, r, 1, "request to Hubu failed")
}
