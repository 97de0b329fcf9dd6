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
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	harness "hubu.dev/hubu/e2e/stack"
)

// grantToken signs a person in as the agent through Hubu's pages (with a sign-in code an
// operator issued for it) and allows a client, as a browser would, without one: it returns
// the client's access token for the stack's router. Every secret of the flow joins the ones the
// suite's logs must not hold.
func (su *suite) grantToken(agentID string) string {
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
	return tokens.Access
}

// httpRouterWith is a session with the stack's HTTP router that presents token (an OAuth access
// token acts for its person's agent).
func (su *suite) httpRouterWith(token string) *mcp.ClientSession {
	su.t.Helper()
	hc := &http.Client{Transport: harness.Bearer(token)}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-oauth"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: su.s.Router.URL() + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		su.t.Fatal(fmt.Errorf("connect with an OAuth token: %w", err))
	}
	su.t.Cleanup(func() { cs.Close() })
	return cs
}
