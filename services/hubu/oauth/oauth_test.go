package oauth_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/oauth"
	"hubu.dev/hubu/services/hubu/postgres"
	hubusql "hubu.dev/hubu/sql/hubu"
	"hubu.dev/hubu/sql/sqltest"
)

const resource = "https://router.example/mcp"

// env is an authorization server on a database of its own, with one agent and a router.
type env struct {
	t           *testing.T
	store       *postgres.Store
	url         string
	agent       uuid.UUID
	routerToken string
	clock       time.Time
}

func newEnv(t *testing.T, resources ...string) *env {
	t.Helper()
	return newEnvWith(t, func(_ string, c *oauth.Config) {
		if len(resources) > 0 {
			c.Resources = resources
		}
	})
}

// newEnvWith is newEnv with its configuration changed by configure, which is told the issuer
// URL first: settings such as an upstream provider's redirect URI name it. (The server is
// started after configure, but its address is known once it listens.)
func newEnvWith(t *testing.T, configure func(issuer string, c *oauth.Config)) *env {
	t.Helper()
	pool, _ := sqltest.NewPool(t, "hubu", hubusql.Migrations())
	e := &env{t: t, store: postgres.NewStore(pool, time.Hour), clock: time.Now()}
	ts := httptest.NewUnstartedServer(nil)
	t.Cleanup(ts.Close)
	e.url = "http://" + ts.Listener.Addr().String()
	cfg := oauth.Config{Issuer: e.url, Resources: []string{resource}, Store: e.store, Now: func() time.Time { return e.clock }}
	configure(e.url, &cfg)
	as, err := oauth.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts.Config.Handler = as
	ts.Start()
	ctx := context.Background()
	a, _, err := e.store.CreateAgent(ctx, "ada", "acct:ada", hubu.Policy{Currency: "USD", PerOperationCeilingMicros: 1_000_000,
		AutoApproveLimitMicros: 100_000, BudgetMicros: 5_000_000, BudgetPeriod: "day"}, e.clock)
	if err != nil {
		t.Fatal(err)
	}
	e.agent = a.ID
	if e.routerToken, err = e.store.CreateCredential(ctx, hubu.RoleRouter, "router", e.clock); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) invite() string {
	e.t.Helper()
	code, _, err := e.store.CreateInvite(context.Background(), hubu.Principal{}, e.agent, time.Hour, e.clock)
	if err != nil {
		e.t.Fatal(err)
	}
	return code
}

// register registers a native client with a loopback redirect URI.
func (e *env) register() string {
	e.t.Helper()
	resp, err := http.Post(e.url+"/oauth/register", "application/json",
		strings.NewReader(`{"client_name":"Test client","redirect_uris":["http://127.0.0.1/callback"],"token_endpoint_auth_method":"none"}`))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		ClientID string `json:"client_id"`
	}
	if resp.StatusCode != http.StatusCreated || json.NewDecoder(resp.Body).Decode(&out) != nil {
		e.t.Fatalf("register: %d", resp.StatusCode)
	}
	return out.ClientID
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// browser is a person's browser: it follows Hubu's redirects and stops at the client's.
func (e *env) browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if !strings.HasPrefix(r.URL.String(), e.url) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
}

func csrfOf(t *testing.T, resp *http.Response) (string, string) {
	t.Helper()
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfRE.FindStringSubmatch(string(b))
	if m == nil {
		t.Fatalf("%s: no form (status %d): %s", resp.Request.URL.Path, resp.StatusCode, b)
	}
	return m[1], resp.Request.URL.Query().Get("request")
}

// authorize runs the whole front channel in browser b: authorize, sign in with code, allow.
// It returns the redirect the client receives.
func (e *env) authorize(b *http.Client, clientID, challenge, code string, extra url.Values) *url.URL {
	e.t.Helper()
	q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {"http://127.0.0.1:53682/callback"},
		"state": {"st-1"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}, "resource": {resource}}
	for k, v := range extra {
		q[k] = v
	}
	resp, err := b.Get(e.url + "/oauth/authorize?" + q.Encode())
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.Request.URL.Path == "/oauth/signin" {
		csrf, req := csrfOf(e.t, resp)
		resp, err = b.PostForm(e.url+"/oauth/signin", url.Values{"request": {req}, "csrf": {csrf}, "code": {code}})
		if err != nil {
			e.t.Fatal(err)
		}
	}
	page, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(page), "http://127.0.0.1:53682") || !strings.Contains(string(page), clientID) {
		e.t.Fatalf("the consent page does not show where the browser goes back to and which client asks: %s", page)
	}
	resp.Body = io.NopCloser(strings.NewReader(string(page)))
	csrf, req := csrfOf(e.t, resp)
	resp, err = b.PostForm(e.url+"/oauth/consent", url.Values{"request": {req}, "csrf": {csrf}, "decision": {"allow"}})
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode/100 != 3 {
		e.t.Fatalf("allow: status %d, location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return loc
}

func pkce() (verifier, challenge string) {
	verifier = strings.Repeat("v", 20) + uuid.NewString() + uuid.NewString()
	sum := sha256.Sum256([]byte(verifier))
	return verifier, base64.RawURLEncoding.EncodeToString(sum[:])
}

type tokens struct {
	Access  string `json:"access_token"`
	Refresh string `json:"refresh_token"`
	Error   string `json:"error"`
}

func (e *env) token(form url.Values) (tokens, int) {
	e.t.Helper()
	resp, err := http.PostForm(e.url+"/oauth/token", form)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out tokens
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return out, resp.StatusCode
}

func (e *env) introspect(token string) map[string]any {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url+"/oauth/introspect", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+e.routerToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return out
}

func TestCodeFlowRotationAndReplays(t *testing.T) {
	e := newEnv(t)
	client := e.register()
	verifier, challenge := pkce()
	b := e.browser()
	loc := e.authorize(b, client, challenge, e.invite(), nil)
	code := loc.Query().Get("code")
	if code == "" || loc.Query().Get("state") != "st-1" || loc.Query().Get("iss") != e.url || loc.Port() != "53682" {
		t.Fatalf("authorization response %s: want a code, the state, iss and the loopback port asked for", loc.Redacted())
	}
	exchange := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {client},
		"redirect_uri": {"http://127.0.0.1:53682/callback"}, "code_verifier": {verifier}}

	wrong := url.Values{}
	for k, v := range exchange {
		wrong[k] = v
	}
	wrong.Set("code_verifier", strings.Repeat("x", 64))
	if got, status := e.token(wrong); status != http.StatusBadRequest || got.Access != "" {
		t.Fatalf("a wrong verifier got %d %+v", status, got)
	}
	first, status := e.token(exchange)
	if status != http.StatusOK || first.Access == "" || first.Refresh == "" {
		t.Fatalf("exchange: %d %+v", status, first)
	}
	in := e.introspect(first.Access)
	if in["active"] != true || in["aud"] != resource || in["sub"] != e.agent.String() || in["hubu_grant"] == nil {
		t.Fatalf("introspection of a fresh token: %v", in)
	}
	// The same code again is a replay: refused, and the grant it made is revoked.
	if got, status := e.token(exchange); status != http.StatusBadRequest || got.Access != "" {
		t.Fatalf("a reused code got %d %+v", status, got)
	}
	if in := e.introspect(first.Access); in["active"] != false {
		t.Fatalf("the grant of a replayed code still works: %v", in)
	}

	// A new grant (the browser is signed in: no second code), then rotation and its replay.
	verifier, challenge = pkce()
	loc = e.authorize(b, client, challenge, "", nil)
	exchange.Set("code", loc.Query().Get("code"))
	exchange.Set("code_verifier", verifier)
	second, status := e.token(exchange)
	if status != http.StatusOK {
		t.Fatalf("second exchange: %d %+v", status, second)
	}
	refresh := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {second.Refresh}, "client_id": {client}}
	rotated, status := e.token(refresh)
	if status != http.StatusOK || rotated.Refresh == "" || rotated.Refresh == second.Refresh {
		t.Fatalf("refresh: %d %+v", status, rotated)
	}
	if in := e.introspect(rotated.Access); in["active"] != true {
		t.Fatalf("a rotated token is not active: %v", in)
	}
	if got, status := e.token(refresh); status != http.StatusBadRequest || got.Access != "" {
		t.Fatalf("a replayed refresh token got %d %+v", status, got)
	}
	if in := e.introspect(rotated.Access); in["active"] != false {
		t.Fatalf("the grant of a replayed refresh token still works: %v", in)
	}
	if got, _ := e.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rotated.Refresh}, "client_id": {client}}); got.Access != "" {
		t.Fatal("the revoked grant's newest refresh token still works")
	}
}

func TestAuthorizationRefusals(t *testing.T) {
	e := newEnv(t, resource, "https://other.example/mcp")
	client := e.register()
	_, challenge := pkce()
	base := url.Values{"response_type": {"code"}, "client_id": {client}, "redirect_uri": {"http://127.0.0.1:5000/callback"},
		"state": {"s"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}, "resource": {resource}}
	cases := []struct {
		name   string
		change func(url.Values)
		// redirected: the error goes back to the client's redirect URI; otherwise Hubu shows it.
		redirected bool
	}{
		{"plain PKCE", func(q url.Values) { q.Set("code_challenge_method", "plain") }, true},
		{"no PKCE", func(q url.Values) { q.Del("code_challenge"); q.Del("code_challenge_method") }, true},
		{"unknown resource", func(q url.Values) { q.Set("resource", "https://evil.example/mcp") }, true},
		{"no resource among several", func(q url.Values) { q.Del("resource") }, true},
		{"unregistered redirect", func(q url.Values) { q.Set("redirect_uri", "https://evil.example/callback") }, false},
		{"unregistered loopback path", func(q url.Values) { q.Set("redirect_uri", "http://127.0.0.1:5000/other") }, false},
		{"unknown client", func(q url.Values) { q.Set("client_id", "nobody") }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := url.Values{}
			for k, v := range base {
				q[k] = v
			}
			c.change(q)
			resp, err := e.browser().Get(e.url + "/oauth/authorize?" + q.Encode())
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			loc := resp.Header.Get("Location")
			switch {
			case c.redirected && (resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, "http://127.0.0.1:5000/callback?") || !strings.Contains(loc, "error=") ||
				!strings.Contains(loc, "iss="+url.QueryEscape(e.url))):
				t.Fatalf("want an error sent to the client, got %d %q", resp.StatusCode, loc)
			case !c.redirected && (resp.StatusCode/100 == 3 || resp.Request.URL.Path == "/oauth/signin"):
				t.Fatalf("want an error shown by Hubu and no redirect, got %d %q (at %s)", resp.StatusCode, loc, resp.Request.URL.Path)
			}
		})
	}
}

func TestSignInPagesRefuseForgeriesAndWrongCodes(t *testing.T) {
	e := newEnv(t)
	client := e.register()
	_, challenge := pkce()
	b := e.browser()
	q := url.Values{"response_type": {"code"}, "client_id": {client}, "redirect_uri": {"http://127.0.0.1/callback"},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"}, "resource": {resource}}
	resp, err := b.Get(e.url + "/oauth/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"Content-Security-Policy", "X-Frame-Options"} {
		if resp.Header.Get(h) == "" {
			t.Errorf("the sign-in page has no %s", h)
		}
	}
	csrf, req := csrfOf(t, resp)

	// Another browser (no cookie of this one) cannot post this sign-in's form, even with its token.
	other := e.browser()
	resp, _ = other.PostForm(e.url+"/oauth/signin", url.Values{"request": {req}, "csrf": {csrf}, "code": {e.invite()}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a cross-browser post got %d", resp.StatusCode)
	}
	// A forged token in the right browser is refused too.
	resp, _ = b.PostForm(e.url+"/oauth/signin", url.Values{"request": {req}, "csrf": {"forged"}, "code": {e.invite()}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a forged CSRF token got %d", resp.StatusCode)
	}
	// A wrong code, then a used one, then an expired one: the same refusal.
	used := e.invite()
	if _, err := e.store.UseInvite(context.Background(), used, e.clock); err != nil {
		t.Fatal(err)
	}
	expired, _, _ := e.store.CreateInvite(context.Background(), hubu.Principal{}, e.agent, time.Minute, e.clock.Add(-time.Hour))
	for _, code := range []string{"hubu_inv_wrong", used, expired} {
		resp, _ = b.PostForm(e.url+"/oauth/signin", url.Values{"request": {req}, "csrf": {csrf}, "code": {code}})
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "not valid") {
			t.Fatalf("code %q: got %d", code[:min(12, len(code))], resp.StatusCode)
		}
	}
	// The consent page of a request no one signed in for sends the browser to sign in.
	resp, _ = b.Get(e.url + "/oauth/consent?request=" + req)
	resp.Body.Close()
	if resp.Request.URL.Path != "/oauth/signin" {
		t.Fatalf("consent without a sign-in went to %s", resp.Request.URL.Path)
	}
}

func TestIntrospectionIsForRoutersOnly(t *testing.T) {
	e := newEnv(t)
	operator, err := e.store.CreateCredential(context.Background(), hubu.RoleOperator, "op", e.clock)
	if err != nil {
		t.Fatal(err)
	}
	for _, bearer := range []string{"", "nonsense", operator} {
		req, _ := http.NewRequest(http.MethodPost, e.url+"/oauth/introspect", strings.NewReader("token=x"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("introspection with %q: %d", bearer[:min(6, len(bearer))], resp.StatusCode)
		}
	}
	if in := e.introspect("not-a-token"); in["active"] != false {
		t.Fatalf("a made-up token: %v", in)
	}
}

func TestMetadataAndRegistration(t *testing.T) {
	e := newEnv(t)
	resp, err := http.Get(e.url + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	var md map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&md)
	resp.Body.Close()
	if md["issuer"] != e.url || md["registration_endpoint"] != e.url+"/oauth/register" ||
		md["client_id_metadata_document_supported"] != true || !strings.Contains(toJSON(md["code_challenge_methods_supported"]), `"S256"`) ||
		strings.Contains(toJSON(md["code_challenge_methods_supported"]), "plain") {
		t.Fatalf("metadata: %v", md)
	}
	for name, body := range map[string]string{
		"no redirect":        `{"client_name":"x"}`,
		"http non-loopback":  `{"redirect_uris":["http://evil.example/cb"]}`,
		"javascript":         `{"redirect_uris":["javascript:alert(1)"]}`,
		"fragment":           `{"redirect_uris":["https://ok.example/cb#x"]}`,
		"bare custom scheme": `{"redirect_uris":["myapp:/cb"]}`,
	} {
		resp, err := http.Post(e.url+"/oauth/register", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: registered (%d)", name, resp.StatusCode)
		}
	}
}

// A client ID metadata document is fetched like any untrusted URL: a loopback, private or
// link-local host is refused before a connection is made, and so is a non-https URL.
func TestClientMetadataDocumentsRefusePrivateHosts(t *testing.T) {
	e := newEnv(t)
	doc := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the metadata document's host was reached: %s", r.URL)
	}))
	defer doc.Close()
	_, challenge := pkce()
	for _, id := range []string{doc.URL + "/client.json", "https://169.254.169.254/latest/meta-data", "https://[::1]/c.json", "http://example.com/c.json"} {
		q := url.Values{"response_type": {"code"}, "client_id": {id}, "redirect_uri": {"http://127.0.0.1/callback"},
			"code_challenge": {challenge}, "code_challenge_method": {"S256"}, "resource": {resource}}
		resp, err := e.browser().Get(e.url + "/oauth/authorize?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 == 3 || resp.Request.URL.Path != "/oauth/authorize" {
			t.Errorf("client %s: got %d at %s", id, resp.StatusCode, resp.Request.URL.Path)
		}
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A code lives a minute from its issue.
func TestCodesExpire(t *testing.T) {
	e := newEnv(t)
	client := e.register()
	verifier, challenge := pkce()
	loc := e.authorize(e.browser(), client, challenge, e.invite(), nil)
	e.clock = e.clock.Add(oauth.CodeTTL + time.Second)
	got, status := e.token(url.Values{"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")}, "client_id": {client},
		"redirect_uri": {"http://127.0.0.1:53682/callback"}, "code_verifier": {verifier}})
	if status != http.StatusBadRequest || got.Access != "" {
		t.Fatalf("a code %s after its issue: %d %+v", oauth.CodeTTL+time.Second, status, got)
	}
}

// A client named by the URL of its metadata document: Hubu fetches the document, takes its
// name and redirect URIs from it, and refuses a document that does not name itself. (The
// document's host here is a loopback test server, which the production fetcher refuses: the
// test gives Hubu a client that trusts it, as the fetcher's own test gives netguard.)
func TestClientMetadataDocuments(t *testing.T) {
	var docURL string
	docs := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		id := docURL
		if r.URL.Path == "/liar.json" {
			id = "https://elsewhere.example/client.json"
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"client_id": id, "client_name": "Documented client",
			"redirect_uris": []string{"http://127.0.0.1/callback"}, "token_endpoint_auth_method": "none"})
	}))
	defer docs.Close()
	docURL = docs.URL + "/client.json"
	e := newEnvWith(t, func(_ string, c *oauth.Config) { c.MetadataClient = docs.Client() })
	_, challenge := pkce()
	authorize := func(clientID string) *http.Response {
		q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {"http://127.0.0.1:4567/callback"},
			"code_challenge": {challenge}, "code_challenge_method": {"S256"}, "resource": {resource}}
		resp, err := e.browser().Get(e.url + "/oauth/authorize?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := authorize(docURL)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Request.URL.Path != "/oauth/signin" || !strings.Contains(string(body), "Documented client") {
		t.Fatalf("a metadata document's client: %s at %s", resp.Status, resp.Request.URL.Path)
	}
	resp = authorize(docs.URL + "/liar.json")
	resp.Body.Close()
	if resp.Request.URL.Path == "/oauth/signin" || resp.StatusCode/100 == 3 {
		t.Fatalf("a document naming another client id was used: %s at %s", resp.Status, resp.Request.URL.Path)
	}
}

// The request id is in URLs (the consent page's redirect, the browser's history): someone who
// started a sign-in and sent its link to another person must not collect the code that person's
// consent produced. Only the browser that signed in and consented gets it.
func TestCodeGoesOnlyToTheBrowserThatConsented(t *testing.T) {
	e := newEnv(t)
	client := e.register()
	verifier, challenge := pkce()
	b := e.browser()
	b.CheckRedirect = func(r *http.Request, _ []*http.Request) error {
		if r.URL.Path == "/oauth/authorize/callback" || !strings.HasPrefix(r.URL.String(), e.url) {
			return http.ErrUseLastResponse
		}
		return nil
	}
	callback := e.authorize(b, client, challenge, e.invite(), nil)
	if callback.Path != "/oauth/authorize/callback" {
		t.Fatalf("consent sent the browser to %s, want the callback", callback.Redacted())
	}

	noRedirects := func(_ *http.Request, _ []*http.Request) error { return http.ErrUseLastResponse }
	stranger := &http.Client{CheckRedirect: noRedirects}
	other := e.browser()
	other.CheckRedirect = noRedirects
	u, _ := url.Parse(e.url)
	other.Jar.SetCookies(u, []*http.Cookie{{Name: "hubu_oauth_browser", Value: strings.Repeat("o", 43), Path: "/oauth/"}})
	for name, c := range map[string]*http.Client{"no cookie": stranger, "another browser": other} {
		resp, err := c.Get(callback.String())
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Location") != "" || strings.Contains(string(body), "code=") {
			t.Fatalf("%s: the callback answered %d, Location %q", name, resp.StatusCode, resp.Header.Get("Location"))
		}
	}

	resp, err := b.Get(callback.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || loc == nil || loc.Port() != "53682" || loc.Query().Get("code") == "" {
		t.Fatalf("the consenting browser's callback answered %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	got, status := e.token(url.Values{"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")}, "client_id": {client},
		"redirect_uri": {"http://127.0.0.1:53682/callback"}, "code_verifier": {verifier}})
	if status != http.StatusOK || got.Access == "" {
		t.Fatalf("the consenting browser's code does not exchange: %d %+v", status, got)
	}
}
