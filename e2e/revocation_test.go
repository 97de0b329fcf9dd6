package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"hubu.dev/hubu/proto/hubuapi"
)

// An operator revokes the demo agent's credential with hubuctl. The agent's next spend
// through the real router answers a clear error, Hubu records nothing and the provider
// charges nothing. A replacement token (a rotation of the revoked credential) then lets the
// same call go on, and it is charged once.
func TestSuiteRevokedAgentIsChargedNothing(t *testing.T) {
	t.Parallel()
	su := newSuite(t)
	cs := su.router()
	su.mustSucceed(cs, foxArgs, codexMeta("call_before_revocation"), "before the revocation")
	id := su.credentialID(t, hubuapi.CredentialKindAgent, "demo")
	su.hubuctlOK(t, "credentials", "revoke", id)

	before := su.charges()
	operations := su.hubuOperations(t)
	crane := `{"prompt":"a paper crane","model":"flux-dev","width":1024,"height":1024}`
	r := su.mustCall(cs, "generate_image", crane, codexMeta("call_after_revocation"))
	msg, _ := r["error"].(map[string]any)["message"].(string)
	if r.code() != "backend_unavailable" || !strings.Contains(msg, "agent token: an operator revoked it") {
		t.Fatalf("a revoked agent's spend: %v", r)
	}
	if after := su.charges(); after.Count != before.Count || after.TotalMicros != before.TotalMicros {
		t.Fatalf("a revoked agent was charged: %d charges (%d micros), was %d (%d)", after.Count, after.TotalMicros, before.Count, before.TotalMicros)
	}
	if n := su.hubuOperations(t); n != operations {
		t.Fatalf("Hubu recorded %d operations for a revoked agent's request, was %d", n, operations)
	}
	// Hubu's log records the revocation (by whom), never a token (the suite's closing scan).
	if !strings.Contains(su.s.Hubu.Log(), `"msg":"credential revoked"`) {
		t.Fatal("Hubu did not log the revocation")
	}

	// The operator gives the agent a new token; the same call, redelivered, goes on once.
	var rot hubuapi.CredentialRotated
	if err := json.Unmarshal([]byte(su.hubuctlOK(t, "credentials", "rotate", id, "--json")), &rot); err != nil || rot.Token == "" {
		t.Fatalf("credentials rotate --json: %v", err)
	}
	su.extraSecrets = append(su.extraSecrets, rot.Token)
	renewed := su.routerFor(rot.Token, 20*time.Second, nil)
	su.mustSucceed(renewed, crane, codexMeta("call_after_revocation"), "the same call with the new token")
	su.settleAndReconcile(2)
}

// Gongbu's credential at Hubu is rotated with an overlap, and Gongbu restarted with the new
// token while the old one still works (with several Gongbu processes, one at a time); then the
// old one is revoked. Spends go on throughout, each charged once.
func TestSuiteServiceCredentialRotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	su := newSuite(t)
	cs := su.router()
	id := su.credentialID(t, hubuapi.CredentialKindService, "gongbu")
	var rot hubuapi.CredentialRotated
	if err := json.Unmarshal([]byte(su.hubuctlOK(t, "credentials", "rotate", id, "--overlap", "10m", "--json")), &rot); err != nil || rot.Token == "" {
		t.Fatalf("credentials rotate --json: %v", err)
	}
	su.extraSecrets = append(su.extraSecrets, rot.Token)
	if rot.Replaced.State != hubuapi.CredentialStateExpiring {
		t.Fatalf("the replaced credential: %+v", rot.Replaced)
	}
	// Gongbu still holds the old token: within the overlap it works.
	su.mustSucceed(cs, foxArgs, codexMeta("call_with_the_old_token"), "a spend within the overlap, Gongbu on the old token")
	noError(t, su.s.Gongbu.Restart(ctx, false, "GONGBU_HUBU_TOKEN="+rot.Token))
	su.extraSecrets = append(su.extraSecrets, su.s.Credentials.GongbuAtHubuToken)
	su.s.Credentials.GongbuAtHubuToken = rot.Token // what the closing reconciliation uses
	su.hubuctlOK(t, "credentials", "revoke", id)
	crane := `{"prompt":"a paper crane","model":"flux-dev","width":1024,"height":1024}`
	su.mustSucceed(cs, crane, codexMeta("call_with_the_new_token"), "a spend after the old token's revocation, Gongbu on the new token")
	su.settleAndReconcile(2)
}

// hubuctl runs hubuctl against the stack as its operator (bounded) and returns its output; a
// failure's error carries what it said on stderr.
func (su *suite) hubuctl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin.Path("hubuctl"), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, su.s.HubuctlEnv()...)
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		err = fmt.Errorf("%v %s", err, ee.Stderr)
	}
	return string(out), err
}

// hubuctlOK is hubuctl that fails the test unless the command succeeds.
func (su *suite) hubuctlOK(t *testing.T, args ...string) string {
	t.Helper()
	out, err := su.hubuctl(args...)
	if err != nil {
		t.Fatalf("hubuctl %s: %v", strings.Join(args[:min(2, len(args))], " "), err)
	}
	return out
}

// credentialID is the id of the one active credential of that kind and name, from hubuctl.
func (su *suite) credentialID(t *testing.T, kind hubuapi.CredentialKind, name string) string {
	t.Helper()
	var list hubuapi.CredentialList
	noError(t, json.Unmarshal([]byte(su.hubuctlOK(t, "credentials", "list", "--json")), &list))
	for _, c := range list.Credentials {
		if c.Kind == kind && c.Name == name && c.State == hubuapi.CredentialStateActive {
			return c.Id.String()
		}
	}
	t.Fatalf("no active %s credential named %s", kind, name)
	return ""
}

// hubuOperations counts the authorization records in Hubu's database.
func (su *suite) hubuOperations(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	conn := must(pgx.Connect(ctx, su.s.HubuDBURL))(t)
	defer conn.Close(ctx)
	var n int
	noError(t, conn.QueryRow(ctx, "SELECT count(*) FROM operations").Scan(&n))
	return n
}
