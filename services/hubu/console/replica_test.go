package console_test

import (
	"bytes"
	"crypto/sha256"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// via is the same browser (its cookies) talking to another replica, as a load balancer may
// send each of its requests anywhere.
func (br *browser) via(base string) *browser {
	other := *br
	other.base = base
	return &other
}

// Two replicas on one database: alice signs in through the first, approves through the
// second, sees the decision's message on the first, and signs out through the second, which
// ends her session on the first too.
func TestSessionsAcrossReplicas(t *testing.T) {
	t.Parallel()
	b := setup(t)
	second := b.NewReplica(t)
	handle := b.newAgent(t, "painter").hold(t, "a lighthouse")

	one := b.browser(t)
	token := one.mustSignIn(b.OperatorToken)
	two := one.via(second.URL)
	mustStatus(t, "home on the second replica", two.get("/console/"), http.StatusOK, "Signed in as alice", handle)

	got := two.post("/console/approvals/approve", url.Values{"csrf": {token}, "handle": {handle}})
	if got.status != http.StatusSeeOther || got.header.Get("Location") != "/console/" {
		t.Fatalf("approve through the second replica: %d %s", got.status, got.body)
	}
	if s := b.state(t, handle); s != "approved" {
		t.Fatalf("state after the approval: %s", s)
	}
	mustStatus(t, "the message on the first replica", one.get("/console/"), http.StatusOK, "Operation "+handle+" approved.")
	if home := two.get("/console/"); strings.Contains(home.body, "Operation "+handle+" approved.") {
		t.Fatal("the one-time message was shown twice")
	}

	// The browser drops its cookie when it signs out; a copy of it, taken before, shows that
	// the session ended on the server, for the first replica as well.
	u, _ := url.Parse(b.URL + "/console/") // httptest's URL always parses
	kept := b.browser(t)
	kept.client.Jar.SetCookies(u, one.client.Jar.Cookies(u))
	mustStatus(t, "sign out through the second replica", two.post("/console/sign-out", url.Values{"csrf": {token}}), http.StatusSeeOther)
	mustBeSignedOut(t, "the first replica after the sign-out", kept)
	if n := b.Count(t, "SELECT count(*) FROM console_sessions"); n != 0 {
		t.Fatalf("%d sessions left after signing out", n)
	}
}

// The database holds only the session id's hash: a reader of console_sessions learns nothing
// the cookie could be made from.
func TestSessionIDIsNotStored(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.browser(t)
	br.mustSignIn(b.OperatorToken)
	u, _ := url.Parse(b.URL + "/console/") // httptest's URL always parses
	cookies := br.client.Jar.Cookies(u)
	i := slices.IndexFunc(cookies, func(c *http.Cookie) bool { return c.Name == "hubu_console" })
	if i < 0 {
		t.Fatal("no session cookie")
	}
	id := cookies[i].Value

	var idHash []byte
	var row string
	if err := b.Pool.QueryRow(t.Context(), "SELECT id_hash, s::text FROM console_sessions s").Scan(&idHash, &row); err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256([]byte(id)); !bytes.Equal(idHash, want[:]) {
		t.Fatalf("the session is stored under %x, want the id's SHA-256", idHash)
	}
	if strings.Contains(row, id) || strings.Contains(row, b.OperatorToken) {
		t.Fatalf("the session row holds the session id or the token: %s", row)
	}
}

// Sessions that expired are removed from the database even when their browsers never come
// back: the next sign-in sweeps them.
func TestExpiredSessionsAreRemoved(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.browser(t).mustSignIn(b.OperatorToken)
	b.browser(t).mustSignIn(b.OperatorToken)
	b.Clock.Advance(12 * time.Hour)
	b.browser(t).mustSignIn(b.OperatorToken)
	if n := b.Count(t, "SELECT count(*) FROM console_sessions"); n != 1 {
		t.Fatalf("%d sessions after the expired ones were swept, want the new one", n)
	}
}
