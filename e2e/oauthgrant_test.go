package e2e_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	harness "hubu.dev/hubu/e2e/stack"
)

// grant is a client's tokens for the stack's router, as a person's sign-in gave them.
type grant struct {
	Access, Refresh, ClientID string
}

// grantToken signs a person in as the agent through Hubu's pages (with a sign-in code an
// operator issued for it) and allows a client, as a browser would, without one: it returns
// the client's tokens for the stack's router. Every secret of the flow joins the ones the
// suite's logs must not hold.
func (su *suite) grantToken(agentID string) *grant {
	su.t.Helper()
	t := su.t
	hubu := su.s.OAuthIssuer()
	var invite struct {
		Code string `json:"code"`
	}
	postJSON := func(u, bearer, body string, out any) {
		req := must(http.NewRequest(http.MethodPost, u, strings.NewReader(body)))(t)
		req.Header.Set("Content-Type", "application/json")
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp := must(http.DefaultClient.Do(req))(t)
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 || json.NewDecoder(resp.Body).Decode(out) != nil {
			t.Fatalf("POST %s: %s", u, resp.Status)
		}
	}
	postJSON(hubu+"/v1/agents/"+agentID+"/invites", su.s.Credentials.OperatorToken, `{}`, &invite)
	var client struct {
		ID string `json:"client_id"`
	}
	const redirect = "http://127.0.0.1:1/callback" // never reached: the code is read off the redirect
	postJSON(hubu+"/oauth/register", "", `{"client_name":"e2e","redirect_uris":["`+redirect+`"]}`, &client)

	b := make([]byte, 32)
	_, _ = rand.Read(b)
	verifier := base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(verifier))
	jar := must(cookiejar.New(nil))(t)
	browser := &http.Client{Jar: jar, Timeout: 20 * time.Second, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if !strings.HasPrefix(r.URL.String(), hubu) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	q := url.Values{"response_type": {"code"}, "client_id": {client.ID}, "redirect_uri": {redirect}, "state": {"e2e"},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
		"resource": {su.s.OAuthResource()}}
	resp := must(browser.Get(hubu + "/oauth/authorize?" + q.Encode()))(t)
	form := func(resp *http.Response) url.Values {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(body)
		if m == nil {
			t.Fatalf("%s answered %s with no form", resp.Request.URL.Path, resp.Status)
		}
		return url.Values{"request": {resp.Request.URL.Query().Get("request")}, "csrf": {string(m[1])}}
	}
	signIn := form(resp)
	signIn.Set("code", invite.Code)
	consent := form(must(browser.PostForm(hubu+"/oauth/signin", signIn))(t))
	consent.Set("decision", "allow")
	resp = must(browser.PostForm(hubu+"/oauth/consent", consent))(t)
	resp.Body.Close()
	loc := must(url.Parse(resp.Header.Get("Location")))(t)
	code := loc.Query().Get("code")
	if code == "" {
		t.Fatalf("the consent ended at %s %q with no code", resp.Status, loc.Redacted())
	}
	resp = must(http.PostForm(hubu+"/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"client_id": {client.ID}, "redirect_uri": {redirect}, "code_verifier": {verifier}}))(t)
	defer resp.Body.Close()
	var tokens struct {
		Access  string `json:"access_token"`
		Refresh string `json:"refresh_token"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&tokens) != nil || tokens.Access == "" {
		t.Fatalf("the token exchange answered %s", resp.Status)
	}
	su.extraSecrets = append(su.extraSecrets, invite.Code, code, tokens.Access, tokens.Refresh, verifier)
	return &grant{Access: tokens.Access, Refresh: tokens.Refresh, ClientID: client.ID}
}

// refresh trades g's refresh token for new tokens, as a client does when the router refuses
// its access token (it expired: a fault moved Hubu's clock, say).
func (su *suite) refresh(g *grant) error {
	resp, err := http.PostForm(su.s.OAuthIssuer()+"/oauth/token", url.Values{"grant_type": {"refresh_token"},
		"refresh_token": {g.Refresh}, "client_id": {g.ClientID}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var tokens struct {
		Access  string `json:"access_token"`
		Refresh string `json:"refresh_token"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&tokens) != nil || tokens.Access == "" {
		return fmt.Errorf("refresh: %s", resp.Status)
	}
	g.Access, g.Refresh = tokens.Access, tokens.Refresh
	su.extraSecrets = append(su.extraSecrets, tokens.Access, tokens.Refresh)
	return nil
}

// unauthorized reports whether err is the router refusing a session's token.
func unauthorized(err error) bool { return err != nil && strings.Contains(err.Error(), "Unauthorized") }

// httpRouterWith is a session with the stack's HTTP router that presents token (an OAuth access
// token acts for its person's agent).
func (su *suite) httpRouterWith(token string) *mcp.ClientSession {
	su.t.Helper()
	cs, err := su.connectWith(token)
	if err != nil {
		su.t.Fatal(err)
	}
	return cs
}

// connectWith is httpRouterWith that returns its failure (the router is down, or cannot reach
// Hubu to check the token).
func (su *suite) connectWith(token string) (*mcp.ClientSession, error) {
	hc := &http.Client{Transport: harness.Bearer(token)}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-oauth"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: su.s.Router.URL() + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return nil, fmt.Errorf("connect with an OAuth token: %w", err)
	}
	su.t.Cleanup(func() { cs.Close() })
	return cs, nil
}

// A person signed in through OAuth with a client that sends no per-call id (ChatGPT chat, VS
// Code) gets the exact refusal for a spend and can use the read-only tools; an MCP session
// belongs to the agent whose token opened it; and an access token is no credential at Hubu's
// own API (it is bound to the router).
func TestOAuthSessionsAndClientsWithoutCallIDs(t *testing.T) {
	t.Parallel()
	su := newSuite(t)
	agents := map[string]*grant{}
	for _, name := range []string{"carol", "dave"} {
		var created struct {
			Agent struct {
				ID string `json:"id"`
			} `json:"agent"`
			Token string `json:"token"`
		}
		noError(t, json.Unmarshal([]byte(su.hubuctlOK(t, "agent", "create", "--name", name, "--json")), &created))
		su.extraSecrets = append(su.extraSecrets, created.Token)
		agents[name] = su.grantToken(created.Agent.ID)
	}
	carol := su.httpRouterWith(agents["carol"].Access)

	r := su.mustCall(carol, "generate_image", foxArgs, nil)
	if r.code() != "identity_required" {
		t.Fatalf("a spend with no call id through OAuth: %v", r)
	}
	if r := su.mustCall(carol, "capabilities", `{}`, nil); r.code() != "" {
		t.Fatalf("capabilities with no call id through OAuth: %v", r)
	}
	// With a call id, Carol spends as her agent and reads her image; Dave cannot read it.
	spent := su.mustSucceed(carol, foxArgs, codexMeta("call_oauthCarolImage7Qm2Vz"), "through OAuth")
	uri := "hubu://images/" + spent.handle()
	if _, err := carol.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri}); err != nil {
		t.Fatalf("Carol reading her own image: %v", err)
	}
	if _, err := su.httpRouterWith(agents["dave"].Access).ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri}); err == nil {
		t.Fatal("Dave read Carol's image")
	}

	// Carol's session, presented with Dave's token: refused (the session is Carol's agent's).
	hc := &http.Client{Transport: harness.Bearer(agents["carol"].Access)}
	probe := must(mcp.NewClient(&mcp.Implementation{Name: "probe"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: su.s.Router.URL() + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil))(t)
	defer probe.Close()
	req := must(http.NewRequest(http.MethodPost, su.s.Router.URL()+"/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}}`)))(t)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", probe.ID())
	req.Header.Set("Authorization", "Bearer "+agents["dave"].Access)
	resp := must(http.DefaultClient.Do(req))(t)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("another agent's token on Carol's session: %s", resp.Status)
	}

	// The access token at Hubu's API: not a credential there.
	req = must(http.NewRequest(http.MethodGet, su.s.Hubu.URL()+"/v1/capabilities", nil))(t)
	req.Header.Set("Authorization", "Bearer "+agents["carol"].Access)
	resp = must(http.DefaultClient.Do(req))(t)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an access token at Hubu's /v1: %s", resp.Status)
	}
}
