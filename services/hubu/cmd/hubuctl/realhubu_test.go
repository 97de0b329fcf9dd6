package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/kit/testclock"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/hubutest"
	"hubu.dev/hubu/services/hubu/postgres"
)

// realHubu is Hubu over real HTTP on a database of its own, with an operator, alice, whose
// token hubuctl uses (env is hubuctl's environment; a test may change it).
type realHubu struct {
	*hubutest.Env
	t   *testing.T
	env map[string]string
	// secrets are tokens no hubuctl output may contain.
	secrets []string
}

// startRealHubu starts it with the clock at the real time, which the tests use too.
func startRealHubu(t *testing.T) *realHubu {
	e := hubutest.New(t, &hubutest.Options{Clock: testclock.At(time.Now())})
	return &realHubu{Env: e, t: t, secrets: []string{e.OperatorToken, e.ServiceToken},
		env: map[string]string{"HUBU_URL": e.URL, "HUBU_APPROVER_TOKEN": e.OperatorToken}}
}

// ctl runs hubuctl against h and returns what it printed; it fails the test when that holds
// a token.
func (h *realHubu) ctl(args ...string) (string, error) {
	h.t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, func(k string) string { return h.env[k] }, &out, &errOut)
	for _, s := range h.secrets {
		if strings.Contains(out.String()+errOut.String(), s) {
			h.t.Fatalf("hubuctl %v printed a token", args)
		}
	}
	return out.String() + errOut.String(), err
}

// TestAgainstRealHubu drives hubuctl against a real Hubu on a real Postgres: an operator
// creates an agent, the agent's spend is held, and hubuctl lists, approves, denies and shows it.
func TestAgainstRealHubu(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := startRealHubu(t)
	ctl, env := h.ctl, h.env

	out, err := ctl("agent", "create", "--name", "codex-desktop", "--json")
	if err != nil {
		t.Fatalf("agent create: %v %s", err, out)
	}
	var created hubuapi.AgentCreated
	if err := json.Unmarshal([]byte(out), &created); err != nil || !strings.HasPrefix(created.Token, "hubu_agent_") {
		t.Fatalf("agent create --json: %v %s", err, out)
	}
	agentID := created.Agent.Id.String()
	if out, err := ctl("agent", "set-policy", agentID, "--auto-approve-micros", "10000"); err != nil || !strings.Contains(out, "USD 0.01") {
		t.Fatalf("set-policy: %v %s", err, out)
	}
	if out, err := ctl("agent", "list"); err != nil || !strings.Contains(out, "codex-desktop") {
		t.Fatalf("agent list: %v %s", err, out)
	}
	if out, err := ctl("prices", "set", "--provider", "bfl", "--model", "flux-dev", "--size", "*", "--amount-micros", "26000"); err != nil {
		t.Fatalf("prices set: %v %s", err, out)
	}
	if out, err := ctl("prices", "list"); err != nil || !strings.Contains(out, "USD 0.026 an image") {
		t.Fatalf("prices list: %v %s", err, out)
	}
	out, err = ctl("prices", "set", "--provider", "bfl", "--model", "flux-2-pro", "--first-mp-micros", "31000", "--extra-mp-micros", "16000", "--input-mp-micros", "14000")
	if err != nil || !strings.Contains(out, "USD 0.031 first MP, +USD 0.016 per further MP, +USD 0.014 per input MP") {
		t.Fatalf("prices set per megapixel: %v %s", err, out)
	}
	if out, err := ctl("prices", "set", "--provider", "bfl", "--model", "flux-2-pro", "--first-mp-micros", "1", "--amount-micros", "1"); err == nil {
		t.Fatalf("a flat and a per-megapixel price at once: %s", out)
	}

	agent := h.Client(t, created.Token)
	spend := func(prompt string) string {
		c := hubutest.NewCall("flux-dev")
		c.Args.Prompt = prompt
		resp, err := agent.AuthorizeWithResponse(ctx, c.Request())
		if err != nil || resp.JSON201 == nil || resp.JSON201.State != hubuapi.OperationStatePendingApproval {
			t.Fatalf("authorize: %v %s", err, resp.Body)
		}
		return resp.JSON201.PublicHandle
	}
	approveMe, denyMe := spend("an origami fox"), spend("a paper crane")

	out, err = ctl("approvals")
	if err != nil || !strings.Contains(out, approveMe) || !strings.Contains(out, denyMe) || !strings.Contains(out, "an origami fox") {
		t.Fatalf("approvals: %v %s", err, out)
	}
	if out, err := ctl("approve", approveMe); err != nil || !strings.Contains(out, "approved") {
		t.Fatalf("approve: %v %s", err, out)
	}
	if out, err := ctl("deny", denyMe, "--reason", "not today"); err != nil || !strings.Contains(out, "denied") {
		t.Fatalf("deny: %v %s", err, out)
	}
	// Approving a denied operation is refused with its code, and exit status 1.
	out, err = ctl("approve", denyMe)
	if err == nil || code(err) != 1 || !strings.Contains(out, "hubuctl: conflict:") {
		t.Fatalf("approve a denied operation: %v %s", err, out)
	}
	if out, err := ctl("operation", "show", approveMe); err != nil || !strings.Contains(out, "approved") || !strings.Contains(out, "USD 0.026") {
		t.Fatalf("operation show: %v %s", err, out)
	}
	if out, err := ctl("ledger", denyMe); err != nil || !strings.Contains(out, "hold") || !strings.Contains(out, "release") {
		t.Fatalf("ledger: %v %s", err, out)
	}
	if out, _ := ctl("approvals"); strings.Contains(out, approveMe) || strings.Contains(out, denyMe) {
		t.Fatalf("decided operations still pending: %s", out)
	}
	// An agent's token cannot approve, even through hubuctl.
	env["HUBU_APPROVER_TOKEN"] = created.Token
	if out, err := ctl("approvals"); err == nil || !strings.Contains(out, "forbidden") {
		t.Fatalf("approvals with an agent token: %v %s", err, out)
	}
}

// TestInvitesAndGrantsAgainstRealHubu: an operator gives an agent an email and an invite code
// with hubuctl; the person signs in with the code and allows a client (here straight through
// the store, as Hubu's sign-in pages do); hubuctl lists the grant with its client and last
// use, refuses to rotate it, and revokes it.
func TestInvitesAndGrantsAgainstRealHubu(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := startRealHubu(t)
	ctl, store := h.ctl, h.Store

	out, err := ctl("agent", "create", "--name", "painter", "--email", "Alice@Example.com", "--json")
	var created hubuapi.AgentCreated
	if err != nil || json.Unmarshal([]byte(out), &created) != nil || created.Agent.OwnerEmail == nil || *created.Agent.OwnerEmail != "alice@example.com" {
		t.Fatalf("agent create --email: %v %s", err, out)
	}
	h.secrets = append(h.secrets, created.Token)
	agentID := created.Agent.Id.String()
	if id, err := store.AgentByOwnerEmail(ctx, "ALICE@example.com"); err != nil || id != created.Agent.Id {
		t.Fatalf("the agent by its email: %v %v", id, err)
	}
	if out, err := ctl("agent", "create", "--name", "other", "--email", "alice@example.com"); code(err) != 1 ||
		!strings.Contains(out, "Token: hubu_agent_") || !strings.Contains(out, "its email was not set") {
		t.Fatalf("a second agent with the same email: %v %s", err, out)
	} else {
		h.secrets = append(h.secrets, regexp.MustCompile(`hubu_agent_\S+`).FindString(out))
	}
	if out, err := ctl("agent", "set-email", agentID, "--clear"); err != nil || !strings.HasPrefix(out, "Email removed") {
		t.Fatalf("set-email --clear: %v %s", err, out)
	}
	if out, err := ctl("agent", "set-email", agentID, "bob@example.com"); err != nil || !regexp.MustCompile(`(?m)^Email\s+bob@example.com$`).MatchString(out) {
		t.Fatalf("set-email: %v %s", err, out)
	}
	if out, err := ctl("agent", "list"); err != nil || !regexp.MustCompile(`(?m)\spainter\s.*\sbob@example.com$`).MatchString(out) {
		t.Fatalf("agent list: %v %s", err, out)
	}

	// The code is the last line; it signs in once.
	out, err = ctl("agent", "invite", agentID, "--ttl", "1h")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	invite := lines[len(lines)-1]
	if err != nil || !strings.HasPrefix(invite, "hubu_inv_") || !strings.Contains(out, h.Clock.Now().Add(time.Hour).UTC().Format("2006-01-02 15:04")) {
		t.Fatalf("agent invite: %v %s", err, out)
	}
	if id, err := store.UseInvite(ctx, invite, h.Clock.Now()); err != nil || id != created.Agent.Id {
		t.Fatalf("use the code: %v %v", id, err)
	}
	if _, err := store.UseInvite(ctx, invite, h.Clock.Now()); err == nil {
		t.Fatal("the code signed in twice")
	}
	out, err = ctl("agent", "invite", agentID, "--json")
	var inv hubuapi.Invite
	if err != nil || json.Unmarshal([]byte(out), &inv) != nil || !strings.HasPrefix(inv.Code, "hubu_inv_") || inv.AgentId != created.Agent.Id ||
		inv.ExpiresAt.Sub(h.Clock.Now().Add(24*time.Hour)).Abs() > time.Millisecond {
		t.Fatalf("agent invite --json: %v %s", err, out)
	}
	h.secrets = append(h.secrets, invite, inv.Code)
	if out, err := ctl("agent", "invite", "00000000-0000-4000-8000-000000000000"); code(err) != 1 || !strings.Contains(out, "hubuctl: not_found:") {
		t.Fatalf("invite for no agent: %v %s", err, out)
	}

	grant := allowClient(t, h, created.Agent.Id, "Claude")
	if _, err := store.AuthenticateGrant(ctx, grant, h.Clock.Now()); err != nil { // a router used it
		t.Fatal(err)
	}
	used := h.Clock.Now().UTC().Format("2006-01-02 15:04:05Z")
	out, err = ctl("credentials", "list")
	if err != nil || !regexp.MustCompile(`(?m)^`+grant.String()+`\s+agent\s+oauth: Claude\s+active\s+\S+ \S+\s+`+regexp.QuoteMeta(used)+`\s+-\s+-\s+-\s+Claude$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)\sagent\s+painter\s+active\s.*\s-$`).MatchString(out) {
		t.Fatalf("credentials list with a grant: %v\n%s", err, out)
	}
	out, err = ctl("credentials", "list", "--json")
	var list hubuapi.CredentialList
	if err != nil || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("credentials list --json: %v %s", err, out)
	}
	for _, c := range list.Credentials {
		if c.Id == grant && (c.ClientId == nil || *c.ClientId != "client-claude" || c.ClientName == nil || *c.ClientName != "Claude" ||
			c.LastUsedAt == nil || c.AgentId == nil || *c.AgentId != created.Agent.Id) {
			t.Fatalf("the grant in --json: %+v", c)
		}
	}
	if out, err := ctl("credentials", "rotate", grant.String()); code(err) != 1 || !strings.Contains(out, "has no token to rotate") {
		t.Fatalf("rotate a grant: %v %s", err, out)
	}
	out, err = ctl("credentials", "revoke", grant.String())
	if err != nil || !strings.Contains(out, "Revoked agent credential "+grant.String()+" (oauth: Claude)") || !regexp.MustCompile(`(?m)^Client\s+Claude$`).MatchString(out) {
		t.Fatalf("revoke a grant: %v %s", err, out)
	}
	if _, err := store.AuthenticateGrant(ctx, grant, h.Clock.Now()); hubu.ErrorCode(err) != hubu.CodeCredentialRevoked {
		t.Fatalf("the revoked grant: %v", err)
	}
}

// allowClient makes an OAuth grant for the agent as Hubu's sign-in and consent pages do: a
// client, an authorization request, a sign-in, an allow. It returns the grant's credential ID.
func allowClient(t *testing.T, h *realHubu, agentID uuid.UUID, clientName string) uuid.UUID {
	t.Helper()
	ctx, now := context.Background(), h.Clock.Now()
	client := postgres.OAuthClient{ID: "client-" + strings.ToLower(clientName), Name: clientName, RedirectURIs: []string{"https://client.example/callback"}}
	if err := h.Store.SaveOAuthClient(ctx, client, now); err != nil {
		t.Fatal(err)
	}
	req := postgres.AuthRequest{ID: uuid.New(), ClientID: client.ID, RedirectUri: client.RedirectURIs[0], State: "state", Scopes: []string{},
		ResponseMode: "query", Resource: "https://mcp.example.com/mcp", CodeChallenge: strings.Repeat("c", 43), CreatedAt: now, ExpiresAt: now.Add(10 * time.Minute)}
	if err := h.Store.InsertAuthRequest(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := h.Store.SignInAuthRequest(ctx, req.ID, agentID); err != nil {
		t.Fatal(err)
	}
	req, err := h.Store.GetAuthRequest(ctx, req.ID)
	if err != nil {
		t.Fatal(err)
	}
	grant, err := h.Store.AllowAuthRequest(ctx, req, clientName, now)
	if err != nil {
		t.Fatal(err)
	}
	return grant
}
