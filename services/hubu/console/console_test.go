package console_test

import (
	"crypto/tls"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/services/hubu"
)

func TestSignInRefusesOtherTokens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.newAgent(t, "painter")
	for name, token := range map[string]string{
		"agent": a.Token, "service": b.ServiceToken, "wrong": "hubu_operator_" + strings.Repeat("a", 32), "empty": "",
	} {
		br := b.browser(t)
		got := br.signIn(token)
		mustStatus(t, name+" token", got, http.StatusUnauthorized, "That is not a valid operator token.")
		for _, c := range got.header.Values("Set-Cookie") {
			if strings.HasPrefix(c, "hubu_console=") {
				t.Fatalf("%s token got a session cookie: %s", name, c)
			}
		}
		mustBeSignedOut(t, name+" token", br)
	}
}

func TestSignInCookie(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.browser(t)
	got := br.signIn(b.OperatorToken)
	mustStatus(t, "sign in", got, http.StatusSeeOther)
	cookies := (&http.Response{Header: got.header}).Cookies()
	i := slices.IndexFunc(cookies, func(c *http.Cookie) bool { return c.Name == "hubu_console" })
	if i < 0 {
		t.Fatalf("no session cookie: %v", got.header.Values("Set-Cookie"))
	}
	session := cookies[i]
	if !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Path != "/console" || session.Secure {
		t.Fatalf("session cookie flags: %+v", session)
	}
	if strings.Contains(session.Value, b.OperatorToken) || len(session.Value) < 40 {
		t.Fatalf("the session cookie is not a random id: %q", session.Value)
	}
	if session.MaxAge != int((12 * time.Hour).Seconds()) {
		t.Fatalf("session cookie max-age %d", session.MaxAge)
	}
	home := br.get("/console/")
	mustStatus(t, "home", home, http.StatusOK, "Signed in as alice", "Nothing is waiting for approval.")
	if strings.Contains(home.body, b.OperatorToken) {
		t.Fatal("the page shows the token")
	}
	csp := home.header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "script-src 'nonce-") || home.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("security headers: %v", home.header)
	}
	if !strings.Contains(b.Logs.String(), `"msg":"console sign-in","operator":"alice"`) {
		t.Fatalf("the sign-in was not logged: %s", b.Logs.String())
	}

	// Sign-out ends the session on the server, not only in this browser.
	out := br.post("/console/sign-out", url.Values{"csrf": {csrf(t, home)}})
	mustStatus(t, "sign out", out, http.StatusSeeOther)
	replay := b.browser(t)
	u, _ := url.Parse(b.URL + "/console/") // httptest's URL always parses
	replay.client.Jar.SetCookies(u, []*http.Cookie{{Name: "hubu_console", Value: session.Value}})
	mustBeSignedOut(t, "the old session after sign-out", replay)
}

func TestSignInOverTLSSetsSecure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.browser(t)
	page := br.get("/console/sign-in")
	form := url.Values{"csrf": {csrf(t, page)}, "token": {b.OperatorToken}}
	req, _ := http.NewRequest(http.MethodPost, b.URL+"/console/sign-in", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range br.client.Jar.Cookies(req.URL) {
		req.AddCookie(c)
	}
	// httptest's plain server has no TLS; the console's handler is asked directly with a
	// request that says it came over TLS.
	req.TLS = &tls.ConnectionState{}
	rec := httptest.NewRecorder()
	b.Handler.ServeHTTP(rec, req)
	cookies := rec.Result().Cookies()
	i := slices.IndexFunc(cookies, func(c *http.Cookie) bool { return c.Name == "hubu_console" })
	if i < 0 {
		t.Fatalf("no session cookie over TLS: %d %v", rec.Code, rec.Result().Header)
	}
	if c := cookies[i]; !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Fatalf("TLS session cookie flags: %+v", c)
	}
}

func TestCSRF(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.newAgent(t, "painter")
	handle := a.hold(t, "a lighthouse")
	br := b.browser(t)
	token := br.mustSignIn(b.OperatorToken)

	for name, form := range map[string]url.Values{
		"missing token": {"handle": {handle}},
		"wrong token":   {"handle": {handle}, "csrf": {token[:len(token)-1] + "x"}},
		"empty token":   {"handle": {handle}, "csrf": {""}},
	} {
		got := br.post("/console/approvals/approve", form)
		mustStatus(t, name, got, http.StatusForbidden, "security token is missing or wrong")
	}
	// A valid token from a foreign page is refused too.
	br.origin = "https://evil.example"
	mustStatus(t, "foreign origin", br.post("/console/approvals/approve", url.Values{"handle": {handle}, "csrf": {token}}), http.StatusForbidden)
	mustStatus(t, "foreign origin deny", br.post("/console/approvals/deny", url.Values{"handle": {handle}, "csrf": {token}}), http.StatusForbidden)
	mustStatus(t, "foreign origin sign-out", br.post("/console/sign-out", url.Values{"csrf": {token}}), http.StatusForbidden)
	if s := b.state(t, handle); s != hubu.StatePendingApproval {
		t.Fatalf("a refused form changed the operation: %s", s)
	}
	// The sign-in form has its own token (no session yet): without it, no sign-in.
	anon := b.browser(t)
	got := anon.post("/console/sign-in", url.Values{"token": {b.OperatorToken}})
	mustStatus(t, "sign-in without its token", got, http.StatusForbidden)
	anon.origin = "https://evil.example"
	page := anon.get("/console/sign-in")
	mustStatus(t, "sign-in from a foreign origin", anon.post("/console/sign-in", url.Values{"csrf": {csrf(t, page)}, "token": {b.OperatorToken}}), http.StatusForbidden)

	// The same origin with the right token goes through.
	br.origin = b.URL
	mustStatus(t, "same origin", br.post("/console/approvals/approve", url.Values{"handle": {handle}, "csrf": {token}}), http.StatusSeeOther)
	if s := b.state(t, handle); s != hubu.StateApproved {
		t.Fatalf("state after approval: %s", s)
	}
}

func TestPendingListEscapesThePrompt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.newAgent(t, "painter")
	prompt := `<script>alert("owned")</script> & <img src=x onerror=alert(1)>`
	handle := a.hold(t, prompt)
	br := b.browser(t)
	br.mustSignIn(b.OperatorToken)
	for _, path := range []string{"/console/", "/console/fragments/approvals", "/console/approvals/confirm?action=approve&handle=" + url.QueryEscape(handle)} {
		got := br.get(path)
		mustStatus(t, path, got, http.StatusOK, html.EscapeString(prompt), "painter", "flux-pro-1.1-ultra", "16:9", "USD 0.06",
			handle, "2026-11-30 10:00:00 UTC", "2026-12-01 10:00:00 UTC")
		if strings.Contains(got.body, "<script>alert") || strings.Contains(got.body, "<img src=x") {
			t.Fatalf("%s: the prompt is not escaped:\n%s", path, got.body)
		}
	}
}

func TestApproveAndDenyThroughTheForms(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.newAgent(t, "painter")
	approveMe, denyMe := a.hold(t, "approve me"), a.hold(t, "deny me")
	br := b.browser(t)
	br.mustSignIn(b.OperatorToken)

	confirm := br.get("/console/approvals/confirm?action=approve&handle=" + url.QueryEscape(approveMe))
	mustStatus(t, "approve confirmation", confirm, http.StatusOK, "Approve this spend?", "Yes, approve", "approve me")
	if s := b.state(t, approveMe); s != hubu.StatePendingApproval {
		t.Fatalf("the confirmation page changed the state: %s", s)
	}
	got := br.post("/console/approvals/approve", url.Values{"csrf": {csrf(t, confirm)}, "handle": {approveMe}})
	mustStatus(t, "approve", got, http.StatusSeeOther)
	home := br.get("/console/")
	mustContain(t, "after approve", home.body, "Operation "+approveMe+" approved.")
	op, err := b.Store.GetOperation(t.Context(), hubu.Principal{Role: hubu.RoleOperator}, approveMe, b.Clock.Now())
	if err != nil || op.State != hubu.StateApproved || op.DecidedBy == nil || *op.DecidedBy != "alice" || op.DecisionID == nil {
		t.Fatalf("approved operation: %+v %v", op, err)
	}
	// The agent's resume runs it, once.
	if r := a.resume(t, approveMe); r.State != "executing" {
		t.Fatalf("resume: %s", r.State)
	}
	if ds := b.Executor.Decisions(); len(ds) != 1 || ds[0].DecisionID != *op.DecisionID {
		t.Fatalf("executor: %+v", ds)
	}

	confirm = br.get("/console/approvals/confirm?action=deny&handle=" + url.QueryEscape(denyMe))
	mustContain(t, "deny confirmation", confirm.body, "Deny this spend?", "Yes, deny", `name="reason"`)
	got = br.post("/console/approvals/deny", url.Values{"csrf": {csrf(t, confirm)}, "handle": {denyMe}, "reason": {"too <expensive>"}})
	mustStatus(t, "deny", got, http.StatusSeeOther)
	denied, err := b.Store.GetOperation(t.Context(), hubu.Principal{Role: hubu.RoleOperator}, denyMe, b.Clock.Now())
	if err != nil || denied.State != hubu.StateDenied || denied.Denial == nil || denied.Denial.Message != "too <expensive>" || *denied.DecidedBy != "alice" {
		t.Fatalf("denied operation: %+v %v", denied, err)
	}
	if r := a.resume(t, denyMe); r.State != "denied" {
		t.Fatalf("resume after deny: %s", r.State)
	}
	if len(b.Executor.Decisions()) != 1 {
		t.Fatal("a denied operation reached the executor")
	}
	// Deciding again says why not, without changing anything.
	got = br.post("/console/approvals/approve", url.Values{"csrf": {csrf(t, confirm)}, "handle": {denyMe}})
	mustStatus(t, "approve a denied one", got, http.StatusSeeOther)
	mustContain(t, "approve a denied one", br.get("/console/").body, "Not approved: the operation was denied.")
	again := br.get("/console/approvals/confirm?action=approve&handle=" + url.QueryEscape(denyMe))
	mustContain(t, "confirm a denied one", again.body, "no longer waits for that decision (it is denied)")
	if strings.Contains(again.body, "Yes, approve") {
		t.Fatal("a denied operation can still be confirmed")
	}

	// The operations page shows both, with their ledgers, and the agent's budget.
	ops := br.get("/console/operations")
	mustStatus(t, "operations", ops, http.StatusOK, approveMe, denyMe, "executing", "denied", "by alice", "too &lt;expensive&gt;",
		"hold USD 0.06", "release USD 0.06", "held USD 0.06 · captured USD 0.00 · released USD 0.00",
		"<td>painter</td><td>day</td><td>2026-11-30 00:00:00 UTC</td><td>USD 5.00</td><td>USD 0.06</td><td>USD 4.94</td>")
	// Bad input is refused plainly.
	mustStatus(t, "bad handle", br.get("/console/approvals/confirm?action=approve&handle=x"), http.StatusBadRequest)
	mustStatus(t, "unknown handle", br.get("/console/approvals/confirm?action=approve&handle=hubu:public-operation:v1:00000000-0000-0000-0000-000000000000"), http.StatusNotFound)
}

func TestFragment(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.newAgent(t, "painter")
	anon := b.browser(t)
	mustStatus(t, "fragment signed out", anon.get("/console/fragments/approvals"), http.StatusUnauthorized)

	br := b.browser(t)
	br.mustSignIn(b.OperatorToken)
	got := br.get("/console/fragments/approvals")
	mustStatus(t, "empty fragment", got, http.StatusOK, "Nothing is waiting for approval.")
	if strings.Contains(got.body, "<html") || strings.Contains(got.body, "<script") {
		t.Fatalf("the fragment is a whole page:\n%s", got.body)
	}
	handle := a.hold(t, "a fox")
	got = br.get("/console/fragments/approvals")
	mustContain(t, "fragment", got.body, handle, "a fox", "Approve…", "Deny…")
	if ct := got.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Fatalf("fragment content type %q", ct)
	}
}

func TestSessionExpires(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.browser(t)
	br.mustSignIn(b.OperatorToken)
	b.Clock.Advance(12*time.Hour - time.Second)
	mustStatus(t, "home just before expiry", br.get("/console/"), http.StatusOK)
	b.Clock.Advance(time.Second)
	mustBeSignedOut(t, "after expiry", br)
	// Signing in again works.
	br.mustSignIn(b.OperatorToken)
}

func TestRevokedOperatorLosesTheSession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.browser(t)
	br.mustSignIn(b.OperatorToken)
	if _, err := b.Pool.Exec(t.Context(), `UPDATE credentials SET revoked_at = now() WHERE name = 'alice'`); err != nil {
		t.Fatal(err)
	}
	b.Cache.Sync(t) // a revocation made by hand reaches Hubu's cache on its notification
	mustBeSignedOut(t, "a revoked operator", br)
}
