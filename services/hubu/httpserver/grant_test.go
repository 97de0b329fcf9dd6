package httpserver_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/postgres"
)

// allowGrant makes an OAuth grant for the agent as a person's sign-in and consent would.
func allowGrant(t *testing.T, store *postgres.Store, agent uuid.UUID, now time.Time) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	client := postgres.OAuthClient{ID: "client-" + uuid.NewString(), Name: "Test client", RedirectURIs: []string{"http://127.0.0.1/cb"}}
	if err := store.SaveOAuthClient(ctx, client, now); err != nil {
		t.Fatal(err)
	}
	req := postgres.AuthRequest{ID: uuid.New(), ClientID: client.ID, RedirectUri: "http://127.0.0.1/cb", Scopes: []string{"hubu"},
		Resource: "https://router.example/mcp", CodeChallenge: "c", CreatedAt: now, ExpiresAt: now.Add(time.Minute)}
	if err := store.InsertAuthRequest(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := store.SignInAuthRequest(ctx, req.ID, agent); err != nil {
		t.Fatal(err)
	}
	req.AgentID = &agent
	grant, err := store.AllowAuthRequest(ctx, req, client.Name, now)
	if err != nil {
		t.Fatal(err)
	}
	return grant
}

// Hubu-Grant makes a request its grant's agent's only beside a router's credential, and only
// while the grant is valid; a router's credential alone may do nothing under /v1.
func TestGrantHeaderActsOnlyForRouters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	alice := b.NewAgent(t, "alice-agent", nil)
	router, err := b.Store.CreateCredential(ctx, hubu.RoleRouter, "router", b.Clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	grant := allowGrant(t, b.Store, alice.ID, b.Clock.Now())

	get := func(bearer, grant string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, b.URL+"/v1/capabilities", nil)
		req.Header.Set("Authorization", "Bearer "+bearer)
		if grant != "" {
			req.Header.Set(contract.GrantHeader, grant)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		name, bearer, grant string
		want                int
	}{
		{"a router for a live grant", router, grant.String(), http.StatusOK},
		{"a router alone", router, "", http.StatusForbidden},
		{"an agent naming a grant", alice.Token, grant.String(), http.StatusForbidden},
		{"an operator naming a grant", b.OperatorToken, grant.String(), http.StatusForbidden},
		{"a router for an unknown grant", router, uuid.NewString(), http.StatusUnauthorized},
		{"a router for an agent's own credential", router, b.CredentialID(t, alice.Token).String(), http.StatusUnauthorized},
		{"a router for a malformed grant", router, "not-a-grant", http.StatusUnauthorized},
	} {
		if got := get(c.bearer, c.grant); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	// The grant is listed under its agent, with its client, and its use is recorded.
	creds, err := b.Store.ListCredentials(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range creds {
		if c.ID == grant {
			found = c.AgentID != nil && *c.AgentID == alice.ID && c.ClientName != nil && *c.ClientName == "Test client" && c.LastUsedAt != nil
		}
	}
	if !found {
		t.Fatalf("the grant is not listed under its agent with its client and last use: %+v", creds)
	}
	// Revoked, it refuses the router's next request.
	if _, err := b.Store.RevokeCredential(ctx, hubu.Principal{Role: hubu.RoleOperator, CredentialID: b.CredentialID(t, b.OperatorToken), Name: "alice"}, grant, b.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	if got := get(router, grant.String()); got != http.StatusUnauthorized {
		t.Fatalf("a revoked grant: %d", got)
	}
}
