package oauth_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/hubu/oauth"
	"hubu.dev/hubu/services/hubu/oauth/upstream"
	"hubu.dev/hubu/services/hubu/oauth/upstream/upstreamtest"
)

// grace has a verified email that is no agent's owner.
var grace = upstreamtest.User{Username: "grace@example.com", Password: "grace-password-1", Email: "grace@example.com", EmailVerified: true}

// oidcEnv is an authorization server that delegates sign-in to a real OpenID provider, whose
// agent belongs to Ada. It keeps every secret of the sign-ins that it sees go by (the
// provider's codes and tokens, the pending sign-ins' state, nonce and verifier, Hubu's own
// codes, tokens and cookies) to check that none reaches Hubu's log.
type oidcEnv struct {
	*env
	op     *upstreamtest.Provider
	logs   *syncBuffer
	client string

	mu       sync.Mutex
	secrets  []string
	idTokens int // ID tokens the provider issued to Hubu
}

func newOIDCEnv(t *testing.T) *oidcEnv {
	t.Helper()
	o := &oidcEnv{logs: &syncBuffer{}}
	o.env = newEnvWith(t, func(issuer string, c *oauth.Config) {
		redirect := issuer + "/oauth/signin/oidc/callback"
		o.op = upstreamtest.Start(t, []string{redirect}, grace)
		// Hubu's client to the provider, seeing the token responses Hubu gets.
		client := &http.Client{Transport: &recorder{next: http.DefaultTransport, keep: o.keepTokens}}
		p, err := upstream.New(t.Context(), upstream.Config{Issuer: o.op.Issuer, ClientID: o.op.ClientID,
			ClientSecret: o.op.ClientSecret, RedirectURL: redirect, HTTPClient: client})
		if err != nil {
			t.Fatal(err)
		}
		c.Upstream = p
		c.Logger = slog.New(slog.NewTextHandler(o.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	// Agents' owners are matched case-insensitively: the provider says ada@example.com.
	if err := o.store.SetAgentOwner(context.Background(), o.agent, "Ada@Example.com"); err != nil {
		t.Fatal(err)
	}
	o.client = o.register()
	return o
}

func (o *oidcEnv) keep(secrets ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range secrets {
		if s != "" {
			o.secrets = append(o.secrets, s)
		}
	}
}

func (o *oidcEnv) keepTokens(access, id, refresh string) {
	o.keep(access, id, refresh)
	if id != "" {
		o.mu.Lock()
		o.idTokens++
		o.mu.Unlock()
	}
}

// begin opens an authorization in browser b and presses the sign-in page's button for the
// team's account. It returns where Hubu sends the browser (the provider's authorization URL)
// and the request's id.
func (o *oidcEnv) begin(t *testing.T, b *http.Client, challenge string) (*url.URL, string) {
	t.Helper()
	q := url.Values{"response_type": {"code"}, "client_id": {o.client}, "redirect_uri": {"http://127.0.0.1:53682/callback"},
		"state": {"st-1"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}, "resource": {resource}}
	resp, err := b.Get(o.url + "/oauth/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.Request.URL.Path != "/oauth/signin" || !strings.Contains(body, `id="signin-oidc"`) || !strings.Contains(body, `action="/oauth/signin/oidc"`) {
		t.Fatalf("want the sign-in page with a button for the team's account, got %d at %s: %s", resp.StatusCode, resp.Request.URL.Path, body)
	}
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("the sign-in page has no CSRF token: %s", body)
	}
	req := resp.Request.URL.Query().Get("request")
	resp, err = b.PostForm(o.url+"/oauth/signin/oidc", url.Values{"request": {req}, "csrf": {m[1]}})
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	authURL, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(authURL.String(), o.op.Issuer) {
		t.Fatalf("the button for the team's account: %d to %q, want a redirect to %s", resp.StatusCode, resp.Header.Get("Location"), o.op.Issuer)
	}
	if p, err := o.store.GetAuthRequest(context.Background(), uuidOf(t, req)); err != nil || p.UpstreamState == nil || p.UpstreamNonce == nil || p.UpstreamVerifier == nil {
		t.Fatalf("the request keeps no pending sign-in (%v)", err)
	} else {
		o.keep(*p.UpstreamState, *p.UpstreamNonce, *p.UpstreamVerifier)
		if authURL.Query().Get("state") != *p.UpstreamState {
			t.Fatal("the provider is not sent the pending sign-in's state")
		}
	}
	return authURL, req
}

// signIn signs in at the provider as u, in browser b, and returns the redirect back to Hubu.
func (o *oidcEnv) signIn(t *testing.T, b *http.Client, authURL *url.URL, u upstreamtest.User) *url.URL {
	t.Helper()
	callback, err := o.op.SignIn(t.Context(), b, authURL.String(), u)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(callback.String(), o.url+"/oauth/signin/oidc/callback?") {
		t.Fatalf("the provider sent the browser to %s, want Hubu's callback", callback.Redacted())
	}
	o.keep(callback.Query().Get("code"), callback.Query().Get("state"))
	return callback
}

// get is a GET in browser b (following Hubu's redirects): the last response and its page.
func (o *oidcEnv) get(t *testing.T, b *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := b.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	return resp, readAll(t, resp)
}

// signedIn is the agent the request records as signed in, if any.
func (o *oidcEnv) signedIn(t *testing.T, req string) string {
	t.Helper()
	r, err := o.store.GetAuthRequest(context.Background(), uuidOf(t, req))
	if err != nil {
		t.Fatal(err)
	}
	if r.AgentID == nil {
		return ""
	}
	return r.AgentID.String()
}

// grants counts the OAuth grants among the credentials.
func (o *oidcEnv) grants(t *testing.T) int {
	t.Helper()
	creds, err := o.store.ListCredentials(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range creds {
		if c.ClientID != nil {
			n++
		}
	}
	return n
}

// keepCookies keeps the values of the cookies browser b holds for Hubu.
func (o *oidcEnv) keepCookies(b *http.Client) {
	for _, path := range []string{"/oauth/", "/oauth/signin/oidc/callback"} {
		u, _ := url.Parse(o.url + path)
		for _, c := range b.Jar.Cookies(u) {
			o.keep(c.Value)
		}
	}
}

// TestSignInWithTheTeamsAccount runs sign-ins through a real OpenID provider: one that works
// end to end, people it must refuse, callbacks it must refuse, and a log without secrets.
func TestSignInWithTheTeamsAccount(t *testing.T) {
	o := newOIDCEnv(t)

	t.Run("verified owner", func(t *testing.T) {
		verifier, challenge := pkce()
		b := o.browser()
		authURL, req := o.begin(t, b, challenge)
		callback := o.signIn(t, b, authURL, upstreamtest.Ada)

		resp, page := o.get(t, b, callback.String())
		if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/oauth/consent" || !strings.Contains(page, "<dt>Agent</dt><dd>ada</dd>") {
			t.Fatalf("the callback: %d at %s, want the consent page naming agent ada: %s", resp.StatusCode, resp.Request.URL.Path, page)
		}
		if got := o.signedIn(t, req); got != o.agent.String() {
			t.Fatalf("the request is signed in as %q, want the agent %s", got, o.agent)
		}
		o.keepCookies(b)
		// The callback again, in the same browser: its sign-in is spent.
		if resp, _ := o.get(t, b, callback.String()); resp.StatusCode/100 != 4 || resp.Request.URL.Path != "/oauth/signin/oidc/callback" {
			t.Fatalf("a replayed callback got %d at %s", resp.StatusCode, resp.Request.URL.Path)
		}

		csrf := csrfRE.FindStringSubmatch(page)[1]
		resp, err := b.PostForm(o.url+"/oauth/consent", url.Values{"request": {req}, "csrf": {csrf}, "decision": {"allow"}})
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		loc, _ := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode/100 != 3 || loc == nil || !strings.HasPrefix(loc.String(), "http://127.0.0.1:53682/callback?") || loc.Query().Get("code") == "" {
			t.Fatalf("allow: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		code := loc.Query().Get("code")
		got, status := o.token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {o.client},
			"redirect_uri": {"http://127.0.0.1:53682/callback"}, "code_verifier": {verifier}})
		if status != http.StatusOK || got.Access == "" || got.Refresh == "" {
			t.Fatalf("exchange: %d %+v", status, got)
		}
		o.keep(code, got.Access, got.Refresh)
		if in := o.introspect(got.Access); in["active"] != true || in["sub"] != o.agent.String() || in["aud"] != resource {
			t.Fatalf("introspection: %v, want an active token of agent %s for %s", in, o.agent, resource)
		}
		// And after the decision, the callback is refused still.
		if resp, _ := o.get(t, b, callback.String()); resp.StatusCode/100 != 4 {
			t.Fatalf("a callback replayed after consent got %d", resp.StatusCode)
		}
	})

	t.Run("refused people", func(t *testing.T) {
		before := o.grants(t)
		for _, c := range []struct {
			user upstreamtest.User
			says string
		}{
			{upstreamtest.Unverified, "no verified email"},
			{upstreamtest.NoEmail, "no verified email"},
			{grace, "No Hubu agent belongs to grace@example.com"},
		} {
			b := o.browser()
			authURL, req := o.begin(t, b, challengeOf())
			callback := o.signIn(t, b, authURL, c.user)
			resp, page := o.get(t, b, callback.String())
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(page, c.says) {
				t.Fatalf("%s: got %d at %s, want 403 saying %q: %s", c.user.Username, resp.StatusCode, resp.Request.URL.Path, c.says, page)
			}
			if got := o.signedIn(t, req); got != "" {
				t.Fatalf("%s: the request is signed in as %s", c.user.Username, got)
			}
			// Not signed in either: the consent page sends the browser back to sign in.
			if resp, _ := o.get(t, b, o.url+"/oauth/consent?request="+req); resp.Request.URL.Path != "/oauth/signin" {
				t.Fatalf("%s: the consent page went to %s", c.user.Username, resp.Request.URL.Path)
			}
			o.keepCookies(b)
		}
		if after := o.grants(t); after != before {
			t.Fatalf("refused sign-ins made %d grants", after-before)
		}
	})

	t.Run("forged callbacks", func(t *testing.T) {
		b := o.browser()
		authURL, req := o.begin(t, b, challengeOf())
		callback := o.signIn(t, b, authURL, upstreamtest.Ada)

		// A code the provider does not know, with the right state: the provider refuses it,
		// and Hubu logs why (which the log subtest checks for secrets, the real code among them).
		forged := *callback
		q := forged.Query()
		q.Set("code", q.Get("code")+"x")
		forged.RawQuery = q.Encode()
		if resp, _ := o.get(t, b, forged.String()); resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("a made-up code got %d at %s", resp.StatusCode, resp.Request.URL.Path)
		}
		// A state that is not the pending sign-in's.
		q = callback.Query()
		q.Set("state", "forged-"+q.Get("state"))
		forged.RawQuery = q.Encode()
		if resp, _ := o.get(t, b, forged.String()); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("a forged state got %d at %s", resp.StatusCode, resp.Request.URL.Path)
		}
		// The callback in a browser that did not start the sign-in: without the cookie naming
		// the request, then with that cookie copied but not the browser's own.
		if resp, _ := o.get(t, o.browser(), callback.String()); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("a callback without the upstream cookie got %d", resp.StatusCode)
		}
		other := o.browser()
		other.Jar.SetCookies(callback, []*http.Cookie{{Name: "hubu_oauth_upstream", Value: req, Path: "/oauth/signin/oidc/callback"}})
		if resp, _ := o.get(t, other, callback.String()); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("a callback in another browser got %d", resp.StatusCode)
		}
		if got := o.signedIn(t, req); got != "" {
			t.Fatalf("a refused callback signed the request in as %s", got)
		}

		// Two sign-ins in one browser: the cookie names the newer, so the older's callback
		// carries another sign-in's state; the newer's own callback works.
		older := callback
		authURL, req = o.begin(t, b, challengeOf())
		newer := o.signIn(t, b, authURL, upstreamtest.Ada)
		if resp, _ := o.get(t, b, older.String()); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("another sign-in's callback got %d", resp.StatusCode)
		}
		if resp, _ := o.get(t, b, newer.String()); resp.Request.URL.Path != "/oauth/consent" || o.signedIn(t, req) != o.agent.String() {
			t.Fatalf("the sign-in's own callback after refused ones: %d at %s", resp.StatusCode, resp.Request.URL.Path)
		}
		o.keepCookies(b)
	})

	t.Run("log", func(t *testing.T) {
		o.mu.Lock()
		defer o.mu.Unlock()
		logs := o.logs.String()
		// Five sign-ins reached the provider's token endpoint (Ada twice, the three refused),
		// and the made-up code's refusal was logged.
		if o.idTokens < 5 || !strings.Contains(logs, "sign-in through the team's provider failed") {
			t.Fatalf("%d of the provider's ID tokens seen, log %q: the check would prove little", o.idTokens, logs)
		}
		for _, s := range o.secrets {
			if strings.Contains(logs, s) {
				t.Errorf("Hubu's log holds a secret (%s…): %s", s[:min(6, len(s))], logs)
			}
		}
		t.Logf("%d secrets checked against %d bytes of log", len(o.secrets), len(logs))
	})
}

func challengeOf() string {
	_, c := pkce()
	return c
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// recorder is a transport that keeps the tokens in every JSON response it carries.
type recorder struct {
	next http.RoundTripper
	keep func(access, id, refresh string)
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	var tok struct {
		Access  string `json:"access_token"`
		ID      string `json:"id_token"`
		Refresh string `json:"refresh_token"`
	}
	if json.Unmarshal(b, &tok) == nil {
		r.keep(tok.Access, tok.ID, tok.Refresh)
	}
	return resp, nil
}

// syncBuffer is a log destination that handlers on several goroutines may write to.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func uuidOf(t *testing.T, s string) uuid.UUID {
	t.Helper()
	id, err := uuid.Parse(s)
	if err != nil {
		t.Fatalf("request id %q: %v", s, err)
	}
	return id
}
