package console_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/postgres"
)

var inviteCodeRE = regexp.MustCompile(`id="invite-code" class="mono">(hubu_inv_[a-z0-9]+)<`)

// An operator issues a sign-in code for an agent from its page: the code is shown once, on
// the answer to the form, works once, and never reaches the log.
func TestAgentPageIssuesSignInCodes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.newAgent(t, "painter")
	if err := b.Store.SetAgentOwner(t.Context(), a.ID, "Painter@Example.com"); err != nil {
		t.Fatal(err)
	}
	br := b.browser(t)
	br.mustSignIn(b.OperatorToken)

	list := br.get("/console/agents")
	mustStatus(t, "agents", list, http.StatusOK, `<a href="/console/agents/`+a.ID.String()+`">painter</a>`, "painter@example.com", "USD 5.00 per day")
	agentPage := "/console/agents/" + a.ID.String()
	page := br.get(agentPage)
	mustStatus(t, "agent page", page, http.StatusOK, "painter@example.com", a.ID.String(), "Issue a sign-in code", "No client is connected as this agent.")

	got := br.post(agentPage+"/invite", url.Values{"csrf": {csrf(t, page)}, "ttl": {"1h"}})
	mustStatus(t, "issue a code", got, http.StatusOK, "Sign-in code for painter", "until "+b.Clock.Now().Add(time.Hour).UTC().Format("2006-01-02 15:04:05 UTC"),
		"will not be shown again")
	m := inviteCodeRE.FindStringSubmatch(got.body)
	if m == nil {
		t.Fatalf("no code on the page:\n%s", got.body)
	}
	if id, err := b.Store.UseInvite(t.Context(), m[1], b.Clock.Now()); err != nil || id != a.ID {
		t.Fatalf("sign in with the code: %v %v", id, err)
	}
	if _, err := b.Store.UseInvite(t.Context(), m[1], b.Clock.Now()); err == nil {
		t.Fatal("the code signed in twice")
	}
	if strings.Contains(br.get(agentPage).body, m[1]) {
		t.Fatal("the agent's page shows the code again")
	}
	if logs := b.Logs.String(); strings.Contains(logs, m[1]) || !strings.Contains(logs, `"msg":"invite issued"`) {
		t.Fatalf("the log has the code, or not the issue:\n%s", logs)
	}

	// A day by default in the form; a week at most; nothing else.
	got = br.post(agentPage+"/invite", url.Values{"csrf": {csrf(t, page)}, "ttl": {"168h"}})
	mustStatus(t, "a week", got, http.StatusOK, "until "+b.Clock.Now().Add(7*24*time.Hour).UTC().Format("2006-01-02 15:04:05 UTC"))
	mustContain(t, "the form's default", page.body, `<option value="24h" selected>`)
	mustStatus(t, "a year", br.post(agentPage+"/invite", url.Values{"csrf": {csrf(t, page)}, "ttl": {"8760h"}}), http.StatusBadRequest)
	mustStatus(t, "no CSRF token", br.post(agentPage+"/invite", url.Values{"ttl": {"1h"}}), http.StatusForbidden, "security token is missing or wrong")
	mustStatus(t, "no agent", br.post("/console/agents/"+uuid.NewString()+"/invite", url.Values{"csrf": {csrf(t, page)}, "ttl": {"1h"}}), http.StatusNotFound)
	mustStatus(t, "not an ID", br.get("/console/agents/painter"), http.StatusNotFound, "There is no such agent.")
	br.origin = "https://evil.example"
	mustStatus(t, "foreign origin", br.post(agentPage+"/invite", url.Values{"csrf": {csrf(t, page)}, "ttl": {"1h"}}), http.StatusForbidden)
	if got := b.browser(t).get(agentPage); got.status != http.StatusSeeOther || got.header.Get("Location") != "/console/sign-in" {
		t.Fatalf("the agent page signed out: %d", got.status)
	}
}

// The agent's page lists the clients connected as it, with their last use; an operator
// revokes one through a confirmation page, as the API would, and its grant is refused.
func TestAgentPageRevokesConnectedClients(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.newAgent(t, "painter")
	other := b.newAgent(t, "sculptor")
	name := `Claude <script>alert(1)</script>`
	grant := b.allowClient(t, a.ID, name)
	unused := b.allowClient(t, a.ID, "Cursor")
	elsewhere := b.allowClient(t, other.ID, "Elsewhere")
	b.Clock.Advance(time.Hour)
	if _, err := b.Store.AuthenticateGrant(t.Context(), grant, b.Clock.Now()); err != nil { // a router used it
		t.Fatal(err)
	}
	br := b.browser(t)
	br.mustSignIn(b.OperatorToken)

	mustContain(t, "agents", br.get("/console/agents").body, "<td>2</td>", "<td>1</td>")
	agentPage := "/console/agents/" + a.ID.String()
	page := br.get(agentPage)
	mustStatus(t, "agent page", page, http.StatusOK, html.EscapeString(name), "client-claude", "Cursor", b.Clock.Now().UTC().Format("2006-01-02 15:04:05 UTC"),
		"never", "active", "Revoke…", `data-grant="`+grant.String()+`"`, `data-grant="`+unused.String()+`"`)
	if strings.Contains(page.body, "<script>alert") || strings.Contains(page.body, "Elsewhere") {
		t.Fatalf("the client's name is not escaped, or another agent's client is shown:\n%s", page.body)
	}

	confirm := br.get("/console/grants/confirm?id=" + grant.String())
	mustStatus(t, "confirmation", confirm, http.StatusOK, "Revoke this client", html.EscapeString(name), "painter", "Yes, revoke")
	if credentialState(t, b, grant) != hubu.CredentialActive {
		t.Fatal("the confirmation page revoked the grant")
	}
	mustStatus(t, "no CSRF token", br.post("/console/grants/revoke", url.Values{"id": {grant.String()}}), http.StatusForbidden)
	mustStatus(t, "not a grant", br.get("/console/grants/confirm?id="+b.CredentialID(t, a.Token).String()), http.StatusNotFound)
	mustStatus(t, "revoke not a grant", br.post("/console/grants/revoke", url.Values{"csrf": {csrf(t, confirm)}, "id": {b.CredentialID(t, b.OperatorToken).String()}}),
		http.StatusNotFound)
	mustStatus(t, "no id", br.get("/console/grants/confirm?id=x"), http.StatusBadRequest)
	if credentialState(t, b, grant) != hubu.CredentialActive || b.Count(t, `SELECT count(*) FROM credentials WHERE revoked_at IS NOT NULL`) != 0 {
		t.Fatal("a refused form revoked something")
	}

	got := br.post("/console/grants/revoke", url.Values{"csrf": {csrf(t, confirm)}, "id": {grant.String()}})
	mustStatus(t, "revoke", got, http.StatusSeeOther)
	if got.header.Get("Location") != agentPage {
		t.Fatalf("after revoking: sent to %q", got.header.Get("Location"))
	}
	page = br.get(agentPage)
	mustContain(t, "after revoking", page.body, html.EscapeString("Revoked "+name+"'s access as painter: its tokens are refused within seconds."),
		"revoked<br><small>"+b.Clock.Now().UTC().Format("2006-01-02 15:04:05 UTC")+" by alice")
	if _, err := b.Store.AuthenticateGrant(t.Context(), grant, b.Clock.Now()); hubu.ErrorCode(err) != hubu.CodeCredentialRevoked {
		t.Fatalf("the revoked grant: %v", err)
	}
	if credentialState(t, b, unused) != hubu.CredentialActive || credentialState(t, b, elsewhere) != hubu.CredentialActive {
		t.Fatal("another grant was revoked")
	}
	if !strings.Contains(b.Logs.String(), `"msg":"credential revoked","credential_id":"`+grant.String()+`"`) {
		t.Fatalf("the revocation was not logged:\n%s", b.Logs.String())
	}
	// Once revoked, it offers no revocation, and a second one changes nothing.
	again := br.get("/console/grants/confirm?id=" + grant.String())
	mustStatus(t, "confirm a revoked one", again, http.StatusOK, "access is revoked already")
	if strings.Contains(again.body, "Yes, revoke") {
		t.Fatal("a revoked grant can be revoked again")
	}
	mustStatus(t, "revoke again", br.post("/console/grants/revoke", url.Values{"csrf": {csrf(t, confirm)}, "id": {grant.String()}}), http.StatusSeeOther)
	mustContain(t, "revoke again", br.get(agentPage).body, "was revoked already.")
	mustContain(t, "agents after", br.get("/console/agents").body, "<td>1</td>")
}

// allowClient makes an OAuth grant for the agent as Hubu's sign-in and consent pages do: a
// client, an authorization request, a sign-in, an allow. It returns the grant's credential ID.
func (b *bundle) allowClient(t testing.TB, agentID uuid.UUID, clientName string) uuid.UUID {
	t.Helper()
	ctx, now := t.Context(), b.Clock.Now()
	client := postgres.OAuthClient{ID: "client-" + strings.ToLower(strings.Fields(clientName)[0]), Name: clientName,
		RedirectURIs: []string{"https://client.example/callback"}}
	if err := b.Store.SaveOAuthClient(ctx, client, now); err != nil {
		t.Fatal(err)
	}
	req := postgres.AuthRequest{ID: uuid.New(), ClientID: client.ID, RedirectUri: client.RedirectURIs[0], State: "state", Scopes: []string{},
		ResponseMode: "query", Resource: "https://mcp.example.com/mcp", CodeChallenge: strings.Repeat("c", 43), CreatedAt: now, ExpiresAt: now.Add(10 * time.Minute)}
	if err := b.Store.InsertAuthRequest(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := b.Store.SignInAuthRequest(ctx, req.ID, agentID); err != nil {
		t.Fatal(err)
	}
	req, err := b.Store.GetAuthRequest(ctx, req.ID)
	if err != nil {
		t.Fatal(err)
	}
	grant, err := b.Store.AllowAuthRequest(ctx, req, clientName, now)
	if err != nil {
		t.Fatal(err)
	}
	return grant
}

func credentialState(t testing.TB, b *bundle, id uuid.UUID) hubu.CredentialState {
	t.Helper()
	creds, err := b.Store.ListCredentials(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range creds {
		if c.ID == id {
			return c.StateAt(b.Clock.Now())
		}
	}
	t.Fatalf("no credential %s", id)
	return ""
}
