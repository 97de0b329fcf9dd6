package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu"
)

// TestCredentialsAgainstRealHubu lists, rotates and revokes credentials with hubuctl against
// a real Hubu on a real Postgres; no command prints a token except the rotation's new one.
func TestCredentialsAgainstRealHubu(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := startRealHubu(t)
	store, ctl, env := h.Store, h.ctl, h.env
	_, agentToken, err := store.CreateAgent(ctx, "painter", "acct:painter", hubu.DefaultPolicy(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	h.secrets = append(h.secrets, agentToken)
	idOf := func(kind, name string) string {
		t.Helper()
		out, err := ctl("credentials", "list", "--json")
		var list hubuapi.CredentialList
		if err != nil || json.Unmarshal([]byte(out), &list) != nil {
			t.Fatalf("credentials list --json: %v %s", err, out)
		}
		for _, c := range list.Credentials {
			if string(c.Kind) == kind && c.Name == name && c.State == hubuapi.CredentialStateActive {
				return c.Id.String()
			}
		}
		t.Fatalf("no active %s credential %s in %s", kind, name, out)
		return ""
	}

	out, err := ctl("credentials", "list")
	if err != nil || !regexp.MustCompile(`(?m)^ID\s+KIND\s+NAME\s+STATE`).MatchString(out) ||
		!regexp.MustCompile(`(?m)\sagent\s+painter\s+active\s`).MatchString(out) ||
		!regexp.MustCompile(`(?m)\soperator\s+alice\s+active\s`).MatchString(out) {
		t.Fatalf("credentials list: %v\n%s", err, out)
	}
	old := idOf("agent", "painter")

	// Rotation with an overlap prints the new token once and when the old one stops working.
	out, err = ctl("credentials", "rotate", old, "--overlap", "10m")
	if err != nil || !strings.Contains(out, "Rotated agent credential "+old) || !strings.Contains(out, "The old token stays valid until") ||
		!strings.Contains(out, "will not be shown again") {
		t.Fatalf("credentials rotate: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`(?m)^Token: (hubu_agent_\S+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no token in:\n%s", out)
	}
	h.secrets = append(h.secrets, m[1])
	if p, err := store.Authenticate(ctx, m[1], time.Now()); err != nil || p.Role != hubu.RoleAgent || p.Name != "painter" {
		t.Fatalf("the new token: %+v %v", p, err)
	}
	if out, err := ctl("credentials", "list"); err != nil || !regexp.MustCompile(`(?m)\sagent\s+painter\s+expiring\s`).MatchString(out) {
		t.Fatalf("the old credential in its overlap: %v\n%s", err, out)
	}

	// Revocation ends the overlap at once, and records who.
	out, err = ctl("credentials", "revoke", old)
	if err != nil || !strings.Contains(out, "Revoked agent credential "+old) || !regexp.MustCompile(`(?m)^Revoked by\s+alice \(`).MatchString(out) {
		t.Fatalf("credentials revoke: %v\n%s", err, out)
	}
	if _, err := store.Authenticate(ctx, agentToken, time.Now()); hubu.ErrorCode(err) != hubu.CodeCredentialRevoked {
		t.Fatalf("the revoked token authenticates: %v", err)
	}
	if out, err := ctl("credentials", "list"); err != nil || !regexp.MustCompile(`(?m)\sagent\s+painter\s+revoked\s.*alice \(`).MatchString(out) {
		t.Fatalf("the list after the revocation: %v\n%s", err, out)
	}

	// Refusals: the last operator credential, and a replaced credential.
	out, err = ctl("credentials", "revoke", idOf("operator", "alice"))
	if code(err) != 1 || !strings.Contains(out, "hubuctl: conflict: ") || !strings.Contains(out, "last operator credential") {
		t.Fatalf("revoke the last operator: %v %s", err, out)
	}
	if out, err := ctl("credentials", "rotate", old); code(err) != 1 || !strings.Contains(out, "hubuctl: conflict: ") {
		t.Fatalf("rotate a replaced credential: %v %s", err, out)
	}

	// The operator whose credential is revoked gets a clear refusal from hubuctl too.
	bobToken, err := store.CreateCredential(ctx, hubu.RoleOperator, "bob", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	h.secrets = append(h.secrets, bobToken)
	if out, err := ctl("credentials", "revoke", idOf("operator", "alice")); err != nil {
		t.Fatalf("alice revokes herself beside bob: %v %s", err, out)
	}
	if out, err := ctl("credentials", "list"); code(err) != 1 || !strings.Contains(out, "hubuctl: credential_revoked: this credential was revoked at ") {
		t.Fatalf("hubuctl with a revoked token: %v %s", err, out)
	}
	env["HUBU_APPROVER_TOKEN"] = bobToken
	if out, err := ctl("credentials", "list"); err != nil || !regexp.MustCompile(`(?m)\soperator\s+alice\s+revoked\s.*alice \(`).MatchString(out) {
		t.Fatalf("bob's list: %v\n%s", err, out)
	}
	// An agent's token cannot manage credentials.
	env["HUBU_APPROVER_TOKEN"] = m[1]
	if out, err := ctl("credentials", "list"); code(err) != 1 || !strings.Contains(out, "forbidden") {
		t.Fatalf("credentials list with an agent token: %v %s", err, out)
	}
}

// A token given where an ID belongs is never echoed.
func TestCredentialsRevokeNeverEchoesAToken(t *testing.T) {
	t.Parallel()
	token := "hubu_agent_" + strings.Repeat("q", 32)
	r := runCLI(t, map[string]string{"HUBU_URL": "http://127.0.0.1:1", "HUBU_APPROVER_TOKEN": testToken}, "credentials", "revoke", token)
	requireOneErrorLine(t, r, 2, "that is a token, not a credential ID")
	if strings.Contains(r.stderr, token) {
		t.Fatalf("the token was echoed: %q", r.stderr)
	}
}

// A rotation through a fake Hubu sends the overlap in seconds, and none without the flag.
func TestCredentialsRotateSendsOverlap(t *testing.T) {
	t.Parallel()
	const id = testAgent // any UUID
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		_, _ = b.ReadFrom(r.Body)
		bodies = append(bodies, b.String())
		cred := `{"id":"` + id + `","kind":"service","name":"gongbu","state":"%s","created_at":"2026-05-01T09:00:00Z"%s}`
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"credential":` + fmt.Sprintf(cred, "active", "") + `,"token":"hubu_service_new",` +
			`"replaced":` + fmt.Sprintf(cred, "expiring", `,"expires_at":"2026-05-01T09:10:00Z"`) + `}`))
	}))
	t.Cleanup(srv.Close)
	env := map[string]string{"HUBU_URL": srv.URL, "HUBU_APPROVER_TOKEN": testToken}
	r := runCLI(t, env, "credentials", "rotate", id, "--overlap", "10m")
	if r.code != 0 || !strings.Contains(r.stdout, "stays valid until 2026-05-01 09:10:00Z") || !strings.Contains(r.stdout, "Token: hubu_service_new\n") {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	runCLI(t, env, "credentials", "rotate", id)
	if len(bodies) != 2 || bodies[0] != `{"overlap_seconds":600}` || bodies[1] != `{}` {
		t.Fatalf("bodies sent: %q", bodies)
	}
}

// An OAuth grant shows its client and last use; every other credential "-" there. The router
// kind is listed like the others.
func TestWriteCredentialsShowsGrants(t *testing.T) {
	t.Parallel()
	at := func(s string) *time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return &v
	}
	str := func(s string) *string { return &s }
	created := *at("2026-05-01T09:00:00Z")
	creds := []hubuapi.Credential{
		{Id: uuid.MustParse("11111111-1111-4111-8111-111111111111"), Kind: hubuapi.CredentialKindAgent, Name: "oauth: Claude",
			State: hubuapi.CredentialStateActive, CreatedAt: created, ClientId: str("https://claude.ai/oauth/mcp-oauth-client-metadata"),
			ClientName: str("Claude\x1b[31m"), LastUsedAt: at("2026-05-01T10:15:00Z")},
		{Id: uuid.MustParse("22222222-2222-4222-8222-222222222222"), Kind: hubuapi.CredentialKindAgent, Name: "oauth: x",
			State: hubuapi.CredentialStateRevoked, CreatedAt: created, ClientId: str("c-1234"), RevokedAt: at("2026-05-01T11:00:00Z")},
		{Id: uuid.MustParse("33333333-3333-4333-8333-333333333333"), Kind: hubuapi.CredentialKindRouter, Name: "mcp-1",
			State: hubuapi.CredentialStateActive, CreatedAt: created},
	}
	var out strings.Builder
	if err := writeCredentials(&out, creds); err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{
		`(?m)^ID\s+KIND\s+NAME\s+STATE\s+CREATED\s+LAST USED\s+EXPIRES\s+REVOKED\s+REVOKED BY\s+CLIENT$`,
		`(?m)^11111111-\S+\s+agent\s+oauth: Claude\s+active\s+2026-05-01 09:00:00Z\s+2026-05-01 10:15:00Z\s+-\s+-\s+-\s+Claude \[31m$`,
		`(?m)^22222222-\S+\s+agent\s+oauth: x\s+revoked\s+2026-05-01 09:00:00Z\s+-\s+-\s+2026-05-01 11:00:00Z\s+-\s+c-1234$`,
		`(?m)^33333333-\S+\s+router\s+mcp-1\s+active\s+2026-05-01 09:00:00Z\s+-\s+-\s+-\s+-\s+-$`,
	} {
		if !regexp.MustCompile(re).MatchString(out.String()) {
			t.Errorf("no line matches %s in:\n%s", re, out.String())
		}
	}
	out.Reset()
	if err := writeCredential(&out, &creds[0]); err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{`(?m)^Client\s+Claude \[31m$`, `(?m)^Client ID\s+https://claude.ai/oauth/mcp-oauth-client-metadata$`, `(?m)^Last used\s+2026-05-01 10:15:00Z$`} {
		if !regexp.MustCompile(re).MatchString(out.String()) {
			t.Errorf("no line matches %s in:\n%s", re, out.String())
		}
	}
}
