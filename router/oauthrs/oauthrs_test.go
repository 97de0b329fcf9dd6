package oauthrs_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"hubu.dev/hubu/router/mcpserver"
	"hubu.dev/hubu/router/oauthrs"
)

const resource = "http://router.test/mcp"

// introspector stands in for Hubu's /oauth/introspect (the e2e suite runs the real one): it
// answers per token what the test says, and counts the questions.
type introspector struct {
	mu      sync.Mutex
	answers map[string]map[string]any
	asked   atomic.Int32
}

func (in *introspector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	in.asked.Add(1)
	if r.Header.Get("Authorization") != "Bearer router-credential" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	_ = r.ParseForm()
	in.mu.Lock()
	a, ok := in.answers[r.PostForm.Get("token")]
	in.mu.Unlock()
	if !ok {
		a = map[string]any{"active": false}
	}
	_ = json.NewEncoder(w).Encode(a)
}

func (in *introspector) set(token string, a map[string]any) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.answers[token] = a
}

func setup(t *testing.T) (*introspector, *httptest.Server, *time.Time) {
	in := &introspector{answers: map[string]map[string]any{}}
	hubu := httptest.NewServer(in)
	t.Cleanup(hubu.Close)
	now := time.Now()
	rs, err := oauthrs.New(oauthrs.Config{Resource: resource, Issuer: "http://hubu.test", IntrospectionURL: hubu.URL,
		RouterToken: "router-credential", StaticToken: "static-token", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(rs.MetadataPath(), rs.MetadataHandler())
	mux.Handle("/mcp", rs.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := mcpserver.CallerOf(auth.TokenInfoFromContext(r.Context()))
		_, _ = io.WriteString(w, c.Agent+"/"+c.Grant)
	})))
	router := httptest.NewServer(mux)
	t.Cleanup(router.Close)
	return in, router, &now
}

func call(t *testing.T, url, token string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader("{}"))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b)), resp.Header
}

func active(aud any, agent, grant string, exp time.Time) map[string]any {
	return map[string]any{"active": true, "aud": aud, "sub": agent, "hubu_grant": grant, "scope": "hubu offline_access", "exp": exp.Unix()}
}

func TestTokensActForTheirGrantAndOnlyForThisRouter(t *testing.T) {
	in, router, now := setup(t)
	exp := now.Add(time.Hour)
	in.set("ada", active(resource, "agent-a", "grant-a", exp))
	in.set("bob", active([]any{"http://other.test/mcp", resource + "/"}, "agent-b", "grant-b", exp))
	in.set("other", active("http://other.test/mcp", "agent-c", "grant-c", exp))
	in.set("nameless", active(resource, "", "", exp))

	if status, body, _ := call(t, router.URL, "ada"); status != http.StatusOK || body != "agent-a/grant-a" {
		t.Fatalf("ada: %d %q", status, body)
	}
	if status, body, _ := call(t, router.URL, "bob"); status != http.StatusOK || body != "agent-b/grant-b" {
		t.Fatalf("bob (an audience list naming this router): %d %q", status, body)
	}
	if status, body, _ := call(t, router.URL, "static-token"); status != http.StatusOK || body != "/" {
		t.Fatalf("the static token acts for the router's own agent: %d %q", status, body)
	}
	for _, token := range []string{"other", "nameless", "unknown", ""} {
		status, _, h := call(t, router.URL, token)
		if status != http.StatusUnauthorized {
			t.Fatalf("token %q: %d", token, status)
		}
		challenges, err := oauthex.ParseWWWAuthenticate(h.Values("WWW-Authenticate"))
		if err != nil || len(challenges) != 1 || challenges[0].Params["resource_metadata"] != "http://router.test/.well-known/oauth-protected-resource/mcp" {
			t.Fatalf("token %q: WWW-Authenticate %q", token, h.Values("WWW-Authenticate"))
		}
	}
}

func TestARevokedTokenIsRefusedWithinTheCache(t *testing.T) {
	in, router, now := setup(t)
	in.set("ada", active(resource, "agent-a", "grant-a", now.Add(time.Hour)))
	if status, _, _ := call(t, router.URL, "ada"); status != http.StatusOK {
		t.Fatal(status)
	}
	asked := in.asked.Load()
	in.set("ada", map[string]any{"active": false}) // an operator revoked the grant
	if status, _, _ := call(t, router.URL, "ada"); status != http.StatusOK || in.asked.Load() != asked {
		t.Fatalf("within %s the cached answer is used: %d, asked %d times", oauthrs.CacheFor, status, in.asked.Load()-asked)
	}
	*now = now.Add(oauthrs.CacheFor + time.Millisecond)
	if status, _, _ := call(t, router.URL, "ada"); status != http.StatusUnauthorized {
		t.Fatalf("after %s a revoked grant is refused: %d", oauthrs.CacheFor, status)
	}
}

// While Hubu cannot be reached, a token is answered 503 (try again), never 401 (sign in again).
func TestUnreachableHubuIsNotARefusal(t *testing.T) {
	_, router, _ := setup(t)
	rs, err := oauthrs.New(oauthrs.Config{Resource: resource, Issuer: "http://hubu.test", IntrospectionURL: "http://127.0.0.1:1/oauth/introspect",
		RouterToken: "router-credential"})
	if err != nil {
		t.Fatal(err)
	}
	down := httptest.NewServer(rs.Require(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("served without a checked token") })))
	defer down.Close()
	if status, _, h := call(t, down.URL, "ada"); status != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		t.Fatalf("Hubu unreachable: %d, Retry-After %q", status, h.Get("Retry-After"))
	}
	if status, _, _ := call(t, router.URL, "unknown"); status != http.StatusUnauthorized {
		t.Fatalf("an unknown token while Hubu answers: %d", status)
	}
}

func TestMetadataNamesHubu(t *testing.T) {
	_, router, _ := setup(t)
	resp, err := http.Get(router.URL + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var md oauthex.ProtectedResourceMetadata
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil {
		t.Fatal(err)
	}
	if md.Resource != resource || len(md.AuthorizationServers) != 1 || md.AuthorizationServers[0] != "http://hubu.test" {
		t.Fatalf("metadata: %+v", md)
	}
}
