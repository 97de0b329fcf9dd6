package e2e_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	harness "hubu.dev/hubu/e2e/stack"
	"hubu.dev/hubu/kit/proctest"
	"hubu.dev/hubu/proto/hubuapi"
)

// The hosted router for a team (issue 28), end to end: the real stack with Hubu as the OAuth
// authorization server and the router as a protected resource, two people each signing in from
// the official TypeScript SDK's OAuth client through a real Chromium with a code from
// `hubuctl agent invite`, and each spending as their own agent. The same call id and arguments
// from both are two operations charged to two agents. Then what must be refused is: a wrong
// PKCE verifier, a reused code (which revokes its grant), a token for another router, a
// replayed refresh token (which revokes its grant), and a person whose grant an operator
// revoked, while the other person goes on. No code or token reaches a log (the suite's scan).
func TestOAuthTeamRouter(t *testing.T) {
	t.Parallel()
	o := newOAuthStack(t)
	alice, bob := o.person("alice"), o.person("bob")

	// Each person's client discovers Hubu from the router's 401, registers, and sends the
	// person's browser to sign in; the browser comes back to the client's loopback redirect.
	for _, p := range []*oauthPerson{alice, bob} {
		p.client = o.startClient("Hubu e2e client (" + p.name + ")")
		authorize := p.client.expect("authorize", 30*time.Second)
		o.signInAndAllow(p, authorize.URL)
		p.clientID = p.client.expect("connected", 30*time.Second).ClientID
		o.remember(p.client.tokens())
	}

	// The same call id and the same arguments from both: two operations, one for each agent.
	meta := map[string]any{"callId": "call_oauth_team_5d1b0c7e9a2f", "threadId": "thread-oauth-team-e2e", "openai/session": "sess-oauth-e2e"}
	spent := map[*oauthPerson]result{}
	for _, p := range []*oauthPerson{alice, bob} {
		r := p.client.call(t, "generate_image", foxArgs, meta)
		if r["status"] != "succeeded" || r["replayed"] == true || r.handle() == "" {
			t.Fatalf("%s's spend: %v", p.name, r)
		}
		spent[p] = r
	}
	if spent[alice].handle() == spent[bob].handle() {
		t.Fatalf("two people's calls with one call id became one operation: %s", spent[alice].handle())
	}
	// A redelivery is recognised for its own agent only.
	if r := alice.client.call(t, "generate_image", foxArgs, meta); r["replayed"] != true || r.handle() != spent[alice].handle() {
		t.Fatalf("alice's redelivery: %v", r)
	}
	for _, p := range []*oauthPerson{alice, bob} {
		var op hubuapi.Operation
		noError(t, json.Unmarshal([]byte(o.su.hubuctlOK(t, "operation", "show", spent[p].handle(), "--json")), &op))
		if op.AgentId.String() != p.agentID || op.State != hubuapi.OperationStateSucceeded || op.CapturedMicros <= 0 || op.CapturedMicros != op.AmountMicros {
			t.Fatalf("%s's operation: agent %s (want %s), state %s, captured %d of %d", p.name, op.AgentId, p.agentID, op.State, op.CapturedMicros, op.AmountMicros)
		}
	}
	o.su.settleAndReconcile(2)

	// Each grant is a credential of its person's agent, with its client's name and last use.
	for _, p := range []*oauthPerson{alice, bob} {
		g := o.grant(p)
		if g.ClientName == nil || *g.ClientName != "Hubu e2e client ("+p.name+")" || g.LastUsedAt == nil || g.Kind != hubuapi.CredentialKindAgent {
			t.Fatalf("%s's grant as hubuctl lists it: %+v", p.name, g)
		}
	}

	o.refusals(alice)

	// An operator revokes alice's grant: her next call is refused (Hubu refuses the grant at
	// once, while the router may still hold her token as active), and within seconds the router
	// refuses her token itself; bob's calls go on.
	if ev := alice.client.callRaw("capabilities", "{}", nil); ev.Event != "result" || ev.Result.IsError {
		t.Fatalf("alice's call before the revocation: %+v", ev)
	}
	o.su.hubuctlOK(t, "credentials", "revoke", o.grant(alice).Id.String())
	start := time.Now()
	if ev := alice.client.callRaw("capabilities", "{}", nil); ev.Event == "result" && !ev.Result.IsError {
		t.Fatalf("alice's next call after her grant was revoked was answered: %+v", ev.Result)
	}
	err := poll(10*time.Second, 100*time.Millisecond, func() error {
		ev := alice.client.callRaw("capabilities", "{}", nil)
		if ev.Event == "error" && ev.Unauthorized {
			if !ev.Reauthorize {
				return fmt.Errorf("alice's client was refused but not asked to sign in again: %s", ev.Message)
			}
			return nil
		}
		if ev.Event == "result" && !ev.Result.IsError {
			t.Fatalf("alice's call was answered after her grant was revoked")
		}
		return fmt.Errorf("not refused by the router yet: %s", ev.Message)
	})
	if err != nil {
		t.Fatalf("alice's client after the revocation: %v", err)
	}
	t.Logf("the router refused the revoked grant %v after its revocation", time.Since(start).Round(10*time.Millisecond))
	if ev := bob.client.callRaw("capabilities", "{}", nil); ev.Event != "result" || ev.Result.IsError {
		t.Fatalf("bob's call after alice's revocation: %+v", ev)
	}
	if n := o.su.charges().Count; n != 2 {
		t.Fatalf("%d charges, want 2", n)
	}
}

// refusals checks, with p's browser (signed in already) and a client of the test's own, what
// Hubu and the router refuse.
func (o *oauthStack) refusals(p *oauthPerson) {
	t := o.su.t
	c := o.registerClient()

	// A wrong PKCE verifier.
	code, _ := c.authorize(o, p, o.resource)
	if status, a := c.exchange(code, "a-verifier-that-is-not-the-one-whose-challenge-was-sent-0123456789", o.resource); status != http.StatusBadRequest || a.Error != "invalid_grant" {
		t.Fatalf("a wrong code_verifier: %d %+v", status, a)
	}

	// A reused code: refused, and the tokens its first exchange gave stop working.
	code, verifier := c.authorize(o, p, o.resource)
	status, first := c.exchange(code, verifier, o.resource)
	if status != http.StatusOK || first.AccessToken == "" || first.RefreshToken == "" {
		t.Fatalf("the exchange: %d %+v", status, first)
	}
	o.remember(first)
	if s := o.routerStatus(first.AccessToken); s != http.StatusOK { // the router caches it
		t.Fatalf("the router answered %d to a fresh token", s)
	}
	if status, a := c.exchange(code, verifier, o.resource); status != http.StatusBadRequest || a.Error != "invalid_grant" {
		t.Fatalf("a reused code: %d %+v", status, a)
	}
	o.waitRefused("the access token of a reused code's first exchange", first.AccessToken)
	if status, a := c.refresh(first.RefreshToken, o.resource); status != http.StatusBadRequest || a.Error != "invalid_grant" {
		t.Fatalf("the refresh token of a reused code's first exchange: %d %+v", status, a)
	}

	// A token for another router that Hubu serves.
	code, verifier = c.authorize(o, p, o.other)
	status, other := c.exchange(code, verifier, o.other)
	if status != http.StatusOK || other.AccessToken == "" {
		t.Fatalf("the exchange for the other router: %d %+v", status, other)
	}
	o.remember(other)
	if s := o.routerStatus(other.AccessToken); s != http.StatusUnauthorized {
		t.Fatalf("the router answered %d to a token for another router", s)
	}

	// A replayed refresh token: refused, and the grant's tokens stop working.
	code, verifier = c.authorize(o, p, o.resource)
	status, issued := c.exchange(code, verifier, o.resource)
	if status != http.StatusOK {
		t.Fatalf("the exchange: %d %+v", status, issued)
	}
	o.remember(issued)
	status, rotated := c.refresh(issued.RefreshToken, o.resource)
	if status != http.StatusOK || rotated.RefreshToken == "" || rotated.RefreshToken == issued.RefreshToken {
		t.Fatalf("a refresh: %d %+v", status, rotated)
	}
	o.remember(rotated)
	if s := o.routerStatus(rotated.AccessToken); s != http.StatusOK {
		t.Fatalf("the router answered %d to a refreshed token", s)
	}
	if status, a := c.refresh(issued.RefreshToken, o.resource); status != http.StatusBadRequest || a.Error != "invalid_grant" {
		t.Fatalf("a replayed refresh token: %d %+v", status, a)
	}
	o.waitRefused("the access token of a grant whose refresh token was replayed", rotated.AccessToken)
	if status, a := c.refresh(rotated.RefreshToken, o.resource); status != http.StatusBadRequest || a.Error != "invalid_grant" {
		t.Fatalf("the current refresh token of a grant whose refresh token was replayed: %d %+v", status, a)
	}
}

// oauthStack is a stack whose Hubu issues tokens for two routers: the stack's own, and another
// one (never started), so that a token for another router is a real one.
type oauthStack struct {
	su       *suite
	resource string // the stack's router, as its clients reach it
	other    string
	browser  context.Context // Chromium, started; each person gets a browser context of their own
	nodeDir  string
}

type oauthPerson struct {
	name, agentID, invite string
	browser               context.Context
	client                *nodeClient
	clientID              string
}

func newOAuthStack(t *testing.T) *oauthStack {
	t.Helper()
	chromium := proctest.Chromium(t)
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not installed; the OAuth test needs Node.js 20 or later")
	}
	nodeDir := must(filepath.Abs(filepath.Join("testdata", "oauthclient")))(t)
	if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Fatal("run `npm ci` in e2e/testdata/oauthclient (make test does) to install the TypeScript MCP client")
	}
	server, id, dir, idConfig := stackPlace(t)
	routerAddr := must(harness.FreeAddr())(t)
	o := &oauthStack{resource: "http://" + routerAddr + "/mcp", other: "http://127.0.0.1:1/mcp", nodeDir: nodeDir}
	o.su = startSuite(t, harness.Config{
		Dir: dir, ServerURL: server, HubuDB: "hubu_e2e_" + id, GongbuDB: "gongbu_e2e_" + id, RouterAddr: routerAddr,
		Env: map[string][]string{
			"router": {"ROUTER_IDENTITY_CONFIG=" + idConfig},
			"hubu":   {"HUBU_OAUTH_RESOURCES=" + o.resource + "," + o.other},
		},
	})
	if got := o.su.s.OAuthResource(); got != o.resource {
		t.Fatalf("the stack's router resource is %s, want %s", got, o.resource)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.UserDataDir(t.TempDir()))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		_ = chromedp.Cancel(cctx)
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	o.browser = ctx
	return o
}

// person creates an agent for name and an invite code for it, both with hubuctl, and a
// browser context of its own (a person's own browser: cookies are not shared).
func (o *oauthStack) person(name string) *oauthPerson {
	t := o.su.t
	var created hubuapi.AgentCreated
	noError(t, json.Unmarshal([]byte(o.su.hubuctlOK(t, "agent", "create", "--name", name, "--json")), &created))
	var inv hubuapi.Invite
	noError(t, json.Unmarshal([]byte(o.su.hubuctlOK(t, "agent", "invite", created.Agent.Id.String(), "--json")), &inv))
	if !strings.HasPrefix(inv.Code, "hubu_inv_") {
		t.Fatalf("hubuctl agent invite --json: a code %.9s…", inv.Code)
	}
	o.su.extraSecrets = append(o.su.extraSecrets, created.Token, inv.Code)
	ctx, cancel := chromedp.NewContext(o.browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	// The first run opens the tab and lives as long as its context: no timeout on it.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open %s's browser: %v", name, err)
	}
	return &oauthPerson{name: name, agentID: created.Agent.Id.String(), invite: inv.Code, browser: ctx}
}

// remember adds tokens to the secrets no log may hold.
func (o *oauthStack) remember(a tokenAnswer) {
	o.su.extraSecrets = append(o.su.extraSecrets, a.AccessToken, a.RefreshToken)
}

// browse runs browser steps for p, bounded.
func (o *oauthStack) browse(p *oauthPerson, what string, steps ...chromedp.Action[chromedp.Void]) {
	t := o.su.t
	t.Helper()
	ctx, cancel := context.WithTimeout(p.browser, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s, in %s's browser: %v", what, p.name, err)
	}
}

// location is where p's browser is; the code it came back with is one of the secrets.
func (o *oauthStack) location(p *oauthPerson) *url.URL {
	t := o.su.t
	t.Helper()
	ctx, cancel := context.WithTimeout(p.browser, 10*time.Second)
	defer cancel()
	loc := must(chromedp.Run(ctx, chromedp.Location()))(t)
	u := must(url.Parse(loc))(t)
	if code := u.Query().Get("code"); code != "" {
		o.su.extraSecrets = append(o.su.extraSecrets, code)
	}
	return u
}

// signInAndAllow takes p's browser through Hubu's sign-in page (p's invite code) and consent
// page (which names p's agent) to the client's redirect.
func (o *oauthStack) signInAndAllow(p *oauthPerson, authorizeURL string) {
	o.browse(p, "the sign-in page",
		chromedp.Navigate(authorizeURL),
		chromedp.WaitVisible(chromedp.CSS("#signin")),
		chromedp.SendKeys(chromedp.CSS(`input[name="code"]`), p.invite),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#allow")),
	)
	o.allow(p)
}

// allow checks that the consent page names p's agent, and allows.
func (o *oauthStack) allow(p *oauthPerson) {
	t := o.su.t
	t.Helper()
	ctx, cancel := context.WithTimeout(p.browser, 10*time.Second)
	agent := must(chromedp.Run(ctx, chromedp.Evaluate[string](
		`[...document.querySelectorAll("dt")].find((d) => d.textContent.trim() === "Agent")?.nextElementSibling?.textContent.trim() ?? ""`)))(t)
	cancel()
	if agent != p.name {
		t.Fatalf("the consent page in %s's browser names the agent %q", p.name, agent)
	}
	o.browse(p, "the consent page", chromedp.Click(chromedp.CSS("#allow")), chromedp.WaitVisible(chromedp.CSS("#done")))
	if u := o.location(p); u.Query().Get("code") == "" {
		t.Fatalf("%s's browser came back without a code: %s", p.name, u.Redacted())
	}
}

// routerStatus is the router's answer to an MCP initialize request with the token.
func (o *oauthStack) routerStatus(token string) int {
	t := o.su.t
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e-oauth","version":"1.0.0"}}}`
	req := must(http.NewRequest(http.MethodPost, o.resource, strings.NewReader(body)))(t)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp := must((&http.Client{Timeout: 10 * time.Second}).Do(req))(t)
	// Not read: an accepted initialize answers on a stream that a client would go on with.
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		if h := resp.Header.Get("WWW-Authenticate"); !strings.Contains(h, `resource_metadata="`+strings.TrimSuffix(o.resource, "/mcp")+"/.well-known/oauth-protected-resource/mcp") {
			t.Fatalf("the router's 401 says WWW-Authenticate: %s", h)
		}
	}
	return resp.StatusCode
}

// waitRefused waits (bounded: the router caches an active token for 5 s) until the router
// refuses the token.
func (o *oauthStack) waitRefused(what, token string) {
	t := o.su.t
	t.Helper()
	start := time.Now()
	err := poll(10*time.Second, 100*time.Millisecond, func() error {
		if s := o.routerStatus(token); s != http.StatusUnauthorized {
			return fmt.Errorf("the router answered %d", s)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Logf("%s: refused by the router after %v", what, time.Since(start).Round(10*time.Millisecond))
}

// grant is p's client's grant, as `hubuctl credentials list --json` lists it.
func (o *oauthStack) grant(p *oauthPerson) hubuapi.Credential {
	t := o.su.t
	t.Helper()
	var list hubuapi.CredentialList
	noError(t, json.Unmarshal([]byte(o.su.hubuctlOK(t, "credentials", "list", "--json")), &list))
	for _, c := range list.Credentials {
		if c.AgentId != nil && c.AgentId.String() == p.agentID && c.ClientId != nil && *c.ClientId == p.clientID {
			return c
		}
	}
	t.Fatalf("hubuctl credentials list has no grant of %s's agent to client %s", p.name, p.clientID)
	return hubuapi.Credential{}
}

// nodeClient is the TypeScript client (testdata/oauthclient/client.mjs) as a process: commands
// on its stdin, events on its stdout.
type nodeClient struct {
	t      *testing.T
	in     io.Writer
	events chan nodeEvent
	stderr string
}

type nodeEvent struct {
	Event        string `json:"event"`
	URL          string `json:"url"`
	ClientID     string `json:"client_id"`
	Message      string `json:"message"`
	Unauthorized bool   `json:"unauthorized"`
	Reauthorize  bool   `json:"reauthorize"`
	Result       struct {
		IsError           bool   `json:"isError"`
		StructuredContent result `json:"structuredContent"`
	} `json:"result"`
	Tokens *tokenAnswer `json:"tokens"`
}

func (o *oauthStack) startClient(name string) *nodeClient {
	t := o.su.t
	t.Helper()
	stderr := filepath.Join(o.su.s.Config.Dir, "oauthclient-"+strings.Trim(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' {
			return r
		}
		return '-'
	}, strings.ToLower(name)), "-")+".stderr")
	cmd := exec.Command("node", filepath.Join(o.nodeDir, "client.mjs"), o.resource, name)
	cmd.Dir = o.nodeDir
	cmd.Stderr = must(os.Create(stderr))(t)
	in := must(cmd.StdinPipe())(t)
	out := must(cmd.StdoutPipe())(t)
	noError(t, cmd.Start())
	c := &nodeClient{t: t, in: in, events: make(chan nodeEvent, 16), stderr: stderr}
	go func() {
		defer close(c.events)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		for sc.Scan() {
			var ev nodeEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				ev = nodeEvent{Event: "unreadable", Message: sc.Text()}
			}
			c.events <- ev
		}
	}()
	t.Cleanup(func() {
		_ = in.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return c
}

// next is the client's next event, waiting at most bound.
func (c *nodeClient) next(bound time.Duration) nodeEvent {
	c.t.Helper()
	select {
	case ev, ok := <-c.events:
		if !ok {
			b, _ := os.ReadFile(c.stderr)
			c.t.Fatalf("the TypeScript client exited:\n%s", b)
		}
		return ev
	case <-time.After(bound):
		b, _ := os.ReadFile(c.stderr)
		c.t.Fatalf("the TypeScript client said nothing for %v:\n%s", bound, b)
	}
	return nodeEvent{}
}

func (c *nodeClient) expect(event string, bound time.Duration) nodeEvent {
	c.t.Helper()
	ev := c.next(bound)
	if ev.Event != event {
		c.t.Fatalf("the TypeScript client: %+v, want the event %s", ev, event)
	}
	return ev
}

func (c *nodeClient) send(cmd map[string]any) {
	c.t.Helper()
	b := must(json.Marshal(cmd))(c.t)
	must(c.in.Write(append(b, '\n')))(c.t)
}

// callRaw calls a tool through the client and returns its answer (a result or an error).
func (c *nodeClient) callRaw(tool, args string, meta map[string]any) nodeEvent {
	c.t.Helper()
	cmd := map[string]any{"op": "call", "name": tool, "arguments": json.RawMessage(args)}
	if meta != nil {
		cmd["_meta"] = meta
	}
	c.send(cmd)
	return c.next(60 * time.Second)
}

// call calls a tool and returns its structured content; an error fails the test.
func (c *nodeClient) call(t *testing.T, tool, args string, meta map[string]any) result {
	t.Helper()
	ev := c.callRaw(tool, args, meta)
	if ev.Event != "result" {
		t.Fatalf("%s through the TypeScript client: %+v", tool, ev)
	}
	return ev.Result.StructuredContent
}

func (c *nodeClient) tokens() tokenAnswer {
	c.t.Helper()
	c.send(map[string]any{"op": "tokens"})
	ev := c.expect("tokens", 10*time.Second)
	if ev.Tokens == nil || ev.Tokens.AccessToken == "" || ev.Tokens.RefreshToken == "" {
		c.t.Fatalf("the TypeScript client holds no tokens after signing in")
	}
	return *ev.Tokens
}

// oauthClient is the test's own OAuth client, registered at Hubu, with a loopback redirect
// that catches the codes.
type oauthClient struct {
	t        *testing.T
	issuer   string
	id       string
	redirect string
	landed   chan url.Values
}

// tokenAnswer is the token endpoint's answer (RFC 6749 §5.1, §5.2).
type tokenAnswer struct {
	AccessToken      string `json:"access_token"`
	RefreshToken     string `json:"refresh_token"`
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description"`
}

func (o *oauthStack) registerClient() *oauthClient {
	t := o.su.t
	t.Helper()
	c := &oauthClient{t: t, issuer: o.su.s.OAuthIssuer(), landed: make(chan url.Values, 1)}
	ln := must(net.Listen("tcp", "127.0.0.1:0"))(t)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, `<!doctype html><title>Signed in</title><p id="done">Signed in.</p>`)
		select {
		case c.landed <- r.URL.Query():
		default:
		}
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	c.redirect = "http://" + ln.Addr().String() + "/callback"
	reg := fmt.Sprintf(`{"client_name":"e2e refusals","redirect_uris":[%q],"token_endpoint_auth_method":"none"}`, c.redirect)
	resp := must(http.Post(c.issuer+"/oauth/register", "application/json", strings.NewReader(reg)))(t)
	defer resp.Body.Close()
	var out struct {
		ClientID string `json:"client_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated || out.ClientID == "" {
		t.Fatalf("registration: %d %v", resp.StatusCode, err)
	}
	c.id = out.ClientID
	return c
}

// authorize sends p's browser (signed in already) through an authorization for resource and
// returns the code it came back with and the PKCE verifier.
func (c *oauthClient) authorize(o *oauthStack, p *oauthPerson, resource string) (code, verifier string) {
	c.t.Helper()
	verifier, state := randomURLSafe(), randomURLSafe()
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{
		"response_type": {"code"}, "client_id": {c.id}, "redirect_uri": {c.redirect}, "scope": {"hubu"}, "state": {state},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}, "resource": {resource},
	}
	o.browse(p, "an authorization of the test's client", chromedp.Navigate(c.issuer+"/oauth/authorize?"+q.Encode()),
		chromedp.WaitVisible(chromedp.CSS("#allow")))
	o.allow(p)
	select {
	case got := <-c.landed:
		if got.Get("state") != state || got.Get("iss") != c.issuer || got.Get("code") == "" {
			c.t.Fatalf("the redirect: state %t, iss %q, code %t", got.Get("state") == state, got.Get("iss"), got.Get("code") != "")
		}
		return got.Get("code"), verifier
	case <-time.After(10 * time.Second):
		c.t.Fatal("the browser never reached the test client's redirect")
	}
	return "", ""
}

func (c *oauthClient) exchange(code, verifier, resource string) (int, tokenAnswer) {
	return c.token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier},
		"redirect_uri": {c.redirect}, "client_id": {c.id}, "resource": {resource}})
}

func (c *oauthClient) refresh(token, resource string) (int, tokenAnswer) {
	return c.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {token}, "client_id": {c.id}, "resource": {resource}})
}

func (c *oauthClient) token(form url.Values) (int, tokenAnswer) {
	c.t.Helper()
	resp := must((&http.Client{Timeout: 10 * time.Second}).PostForm(c.issuer+"/oauth/token", form))(c.t)
	defer resp.Body.Close()
	var a tokenAnswer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		c.t.Fatalf("the token endpoint's answer (%d): %v", resp.StatusCode, err)
	}
	return resp.StatusCode, a
}

func randomURLSafe() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
