package console_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/console"
	"hubu.dev/hubu/services/hubu/httpserver"
	"hubu.dev/hubu/services/hubu/lifecycle"
	"hubu.dev/hubu/services/hubu/postgres"
	hubusql "hubu.dev/hubu/sql/hubu"
	"hubu.dev/hubu/sql/sqltest"
)

// clock is a controllable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// executor is a fake executor: it records the decisions it is handed.
type executor struct {
	mu        sync.Mutex
	decisions []hubu.Decision
}

func (e *executor) Execute(_ context.Context, d hubu.Decision) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.decisions = append(e.decisions, d)
	return nil
}

func (e *executor) Decisions() []hubu.Decision {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]hubu.Decision(nil), e.decisions...)
}

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

type bundle struct {
	db            *pgxpool.Pool
	handler       http.Handler
	store         *postgres.Store
	clock         *clock
	exec          *executor
	url           string
	operatorToken string
	logs          *syncBuffer
}

// setup runs Hubu with its console over real HTTP on its own database, with an operator
// named alice.
func setup(t testing.TB) *bundle {
	t.Helper()
	pool, _ := sqltest.NewPool(t, "hubu", hubusql.Migrations())
	clk := &clock{now: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
	store := postgres.NewStore(pool, 24*time.Hour)
	exec := &executor{}
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	life := &lifecycle.Service{Store: store, Executor: exec, Logger: logger, Now: clk.Now, RetryAfter: 10 * time.Second}
	srv := &httpserver.Server{Store: store, Lifecycle: life, Logger: logger, Now: clk.Now,
		Console: console.New(store, &console.Options{Logger: logger, Now: clk.Now, RefreshEvery: 300 * time.Millisecond})}
	handler := srv.Handler(prometheus.NewRegistry())
	ts := httptest.NewServer(handler)
	t.Cleanup(ts.Close)
	opToken, err := store.CreateCredential(context.Background(), hubu.RoleOperator, "alice", clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle{db: pool, store: store, clock: clk, exec: exec, url: ts.URL, handler: handler, operatorToken: opToken, logs: logs}
	t.Cleanup(func() {
		for _, secret := range []string{"hubu:operation:v1:", "hubu_agent_", "hubu_operator_", "hubu_service_"} {
			if strings.Contains(logs.String(), secret) {
				t.Errorf("Hubu logged a secret (%s…)", secret)
			}
		}
	})
	return b
}

type agent struct {
	name   string
	token  string
	client *hubuapi.ClientWithResponses
}

func (b *bundle) newAgent(t testing.TB, name string) agent {
	t.Helper()
	_, token, err := b.store.CreateAgent(context.Background(), name, "acct:"+name, hubu.DefaultPolicy(), b.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	c, err := hubuapi.NewClientWithResponses(b.url, hubuapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	return agent{name: name, token: token, client: c}
}

// hold makes the agent ask, through the API, for a flux-pro-1.1-ultra image ($0.06, above
// the default auto-approve limit of $0.05), and returns its public handle.
func (a agent) hold(t testing.TB, prompt string) string {
	t.Helper()
	args := hubuapi.GenerateImageArguments{Prompt: prompt, Model: "flux-pro-1.1-ultra", Width: 1024, Height: 1024}
	raw, _ := json.Marshal(args)
	h := sha256.Sum256(append([]byte("generate_image\x00"), raw...))
	req := hubuapi.AuthorizeRequest{
		OperationKey: "hubu:operation:v1:codex:" + uuid.NewString(), PublicHandle: "hubu:public-operation:v1:" + uuid.NewString(),
		Tool: hubuapi.GenerateImage, RequestHash: hex.EncodeToString(h[:]), Arguments: args,
	}
	resp, err := a.client.AuthorizeWithResponse(context.Background(), req)
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
	resp, err := a.client.ResumeOperationWithResponse(context.Background(), handle)
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
	return &browser{t: t, base: b.url, client: &http.Client{
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

func mustStatus(t testing.TB, what string, a answer, want int) {
	t.Helper()
	if a.status != want {
		t.Fatalf("%s: status %d, want %d\n%s", what, a.status, want, a.body)
	}
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
	op, err := b.store.GetOperation(context.Background(), hubu.Principal{Role: hubu.RoleOperator, Name: "test"}, handle, b.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	return op.State
}

func (b *bundle) pool() *pgxpool.Pool { return b.db }

// serveTLS asks Hubu's handler directly with a request that came over TLS, with the
// browser's cookies.
func serveTLS(t testing.TB, b *bundle, req *http.Request, br *browser) *httptest.ResponseRecorder {
	t.Helper()
	for _, c := range br.client.Jar.Cookies(req.URL) {
		req.AddCookie(c)
	}
	req.TLS = &tls.ConnectionState{}
	rec := httptest.NewRecorder()
	b.handler.ServeHTTP(rec, req)
	return rec
}

func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
