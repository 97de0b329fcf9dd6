package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/hubutest"
)

type bundle struct{ *hubutest.Env }

// setup runs Hubu with its console over real HTTP on its own database, with an operator
// named alice.
func setup(t testing.TB) *bundle { return &bundle{hubutest.New(t, &hubutest.Options{Console: true})} }

// agent asks for spend through the API.
type agent struct{ hubutest.Agent }

func (b *bundle) newAgent(t testing.TB, name string) agent { return agent{b.NewAgent(t, name, nil)} }

// hold makes the agent ask, through the API, for a flux-pro-1.1-ultra image ($0.06, above
// the default auto-approve limit of $0.05), and returns its public handle.
func (a agent) hold(t testing.TB, prompt string) string {
	t.Helper()
	c := hubutest.NewCall("flux-pro-1.1-ultra")
	c.Args.Prompt = prompt
	resp, err := a.Client.AuthorizeWithResponse(context.Background(), c.Request())
	if err != nil {
		t.Fatal(err)
	}
	if resp.JSON201 == nil || resp.JSON201.State != hubuapi.OperationStatePendingApproval {
		t.Fatalf("authorize: %d %s", resp.StatusCode(), resp.Body)
	}
	return resp.JSON201.PublicHandle
}

func (a agent) resume(t testing.TB, handle string) hubuapi.Operation {
	t.Helper()
	resp, err := a.Client.ResumeOperationWithResponse(context.Background(), handle)
	if err != nil {
		t.Fatal(err)
	}
	if resp.JSON200 == nil {
		t.Fatalf("resume: %d %s", resp.StatusCode(), resp.Body)
	}
	return *resp.JSON200
}

// browser is a plain HTTP client with a cookie jar that does not follow redirects, so each
// answer can be checked.
type browser struct {
	t      testing.TB
	base   string
	client *http.Client
	origin string // sent as Origin on POSTs when set
}

func (b *bundle) browser(t testing.TB) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: b.URL, client: &http.Client{
		Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (br *browser) do(req *http.Request) answer {
	br.t.Helper()
	resp, err := br.client.Do(req)
	if err != nil {
		br.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		br.t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

func (br *browser) get(path string) answer {
	br.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, br.base+path, nil)
	return br.do(req)
}

func (br *browser) post(path string, form url.Values) answer {
	br.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, br.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if br.origin != "" {
		req.Header.Set("Origin", br.origin)
	}
	return br.do(req)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the CSRF token of a page's forms.
func csrf(t testing.TB, a answer) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(a.body)
	if m == nil {
		t.Fatalf("no CSRF token on the page (%d):\n%s", a.status, a.body)
	}
	return m[1]
}

// signIn signs in with token and returns the answer to the form's POST.
func (br *browser) signIn(token string) answer {
	br.t.Helper()
	page := br.get("/console/sign-in")
	return br.post("/console/sign-in", url.Values{"csrf": {csrf(br.t, page)}, "token": {token}})
}

// mustSignIn signs in and returns the home page's CSRF token.
func (br *browser) mustSignIn(token string) string {
	br.t.Helper()
	if a := br.signIn(token); a.status != http.StatusSeeOther || a.header.Get("Location") != "/console/" {
		br.t.Fatalf("sign in: %d %s", a.status, a.body)
	}
	home := br.get("/console/")
	if home.status != http.StatusOK {
		br.t.Fatalf("home after sign-in: %d", home.status)
	}
	return csrf(br.t, home)
}

// mustStatus checks an answer's status, and that its body holds each of wants.
func mustStatus(t testing.TB, what string, a answer, want int, wants ...string) {
	t.Helper()
	if a.status != want {
		t.Fatalf("%s: status %d, want %d\n%s", what, a.status, want, a.body)
	}
	mustContain(t, what, a.body, wants...)
}

func mustContain(t testing.TB, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Fatalf("%s: %q not found in:\n%s", what, w, body)
		}
	}
}

func (b *bundle) state(t testing.TB, handle string) hubu.State {
	t.Helper()
	op, err := b.Store.GetOperation(context.Background(), hubu.Principal{Role: hubu.RoleOperator, Name: "test"}, handle, b.Clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	return op.State
}

// mustBeSignedOut checks that br's session is over: home sends it to the sign-in page and
// the fragment answers 401.
func mustBeSignedOut(t testing.TB, what string, br *browser) {
	t.Helper()
	if got := br.get("/console/"); got.status != http.StatusSeeOther || got.header.Get("Location") != "/console/sign-in" {
		t.Fatalf("%s: home answered %d %s, want the sign-in page", what, got.status, got.header.Get("Location"))
	}
	mustStatus(t, what+": fragment", br.get("/console/fragments/approvals"), http.StatusUnauthorized)
}
