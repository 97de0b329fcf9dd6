package mcpserver_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"hubu.dev/hubu/kit/testlog"
	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/router/identity"
	"hubu.dev/hubu/router/mcpserver"
	"hubu.dev/hubu/router/registry"
	"hubu.dev/hubu/router/routertest"
)

type env struct {
	router   *mcpserver.Router
	backend  *routertest.Backend
	registry *registry.Registry
	session  *mcp.ClientSession
	logs     *testlog.Buffer
	diag     *testlog.Buffer
	// secrets are raw _meta values and keys that must never reach a log line.
	mu      sync.Mutex
	secrets []string
}

type options struct {
	identity *identity.Config
	keys     registry.KeySource
	state    string
	// gongbuURL replaces the fake Gongbu of routertest (see finality_test.go).
	gongbuURL  string
	wait       time.Duration // how long a spend waits for its image; 2s when zero
	imageLimit int64         // the router's default when zero
	keptWait   time.Duration // the router's KeptImageWait; its default when zero
	// guardImages keeps the router's default refusal of images on loopback and private
	// addresses; the fakes serve them on loopback, so other tests allow those.
	guardImages bool
	metrics     *mcpserver.Metrics // nil counts nothing
}

// setup connects a client to a router over the SDK's in-memory transport, with the fake
// backends behind it.
func setup(t testing.TB, opts *options) *env {
	t.Helper()
	return setupOn(t, nil, opts)
}

// setupOn connects a client to another router in front of the backends of base (new ones when
// base is nil), as a second router process would be.
func setupOn(t testing.TB, base *env, opts *options) *env {
	t.Helper()
	if opts == nil {
		opts = &options{}
	}
	e := &env{logs: &testlog.Buffer{}, diag: &testlog.Buffer{}}
	if base != nil {
		e.backend = base.backend
	} else {
		e.backend = routertest.New(t)
	}
	state := opts.state
	if state == "" {
		state = filepath.Join(t.TempDir(), "router.db")
	}
	reg, err := registry.Open(context.Background(), state, &registry.Options{Keys: opts.keys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	e.registry = reg
	auth := func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+e.backend.Token)
		return nil
	}
	gongbuURL, wait := e.backend.GongbuURL, 2*time.Second
	if opts.gongbuURL != "" {
		gongbuURL = opts.gongbuURL
	}
	if opts.wait > 0 {
		wait = opts.wait
	}
	hubu, _ := hubuapi.NewClientWithResponses(e.backend.HubuURL, hubuapi.WithRequestEditorFn(auth))
	gongbu, _ := gongbuapi.NewClientWithResponses(gongbuURL, gongbuapi.WithRequestEditorFn(auth))
	router := mcpserver.New(mcpserver.Config{
		Registry: reg, Hubu: hubu, Gongbu: gongbu, Identity: opts.identity,
		Logger: slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Diagnose: e.diag,
		Wait: wait, PollEvery: 10 * time.Millisecond, ImageLimit: opts.imageLimit, AllowPrivateImageHosts: !opts.guardImages,
		KeptImageWait: opts.keptWait,
		Metrics:       opts.metrics,
	})
	e.router = router
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := router.Server("test").Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
		e.checkLogs(t)
	})
	e.session = cs
	return e
}

// checkLogs fails when a private key or a raw _meta value reached the router's log.
func (e *env) checkLogs(t testing.TB) {
	t.Helper()
	logs := e.logs.String() + e.diag.String()
	e.mu.Lock()
	secrets := append([]string{}, e.secrets...)
	e.mu.Unlock()
	secrets = append(secrets, e.backend.Keys()...)
	for _, leak := range routertest.LeaksIn(logs, secrets...) {
		t.Errorf("the router logged a secret (%.12s…)", leak)
	}
	if strings.Contains(logs, "hubu:operation:v1:") {
		t.Errorf("the router logged a private operation key")
	}
}

// call sends tools/call with raw JSON arguments and the given _meta. Call ids in tests carry
// a non-hex character (such as "_"), so the log scan cannot mistake a piece of a UUID for one.
func (e *env) call(t testing.TB, tool, args string, meta map[string]any) *mcp.CallToolResult {
	t.Helper()
	e.mu.Lock()
	for _, v := range meta {
		if s, ok := v.(string); ok {
			e.secrets = append(e.secrets, s)
		}
	}
	e.mu.Unlock()
	res, err := e.session.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args), Meta: meta})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", tool, err)
	}
	return res
}

func codex(id string) map[string]any { return map[string]any{"callId": id} }

const fox = `{"prompt":"an origami fox","model":"flux-dev","width":1024,"height":1024}`

// toolResult decodes the structured content of a result.
func toolResult(t testing.TB, res *mcp.CallToolResult) mcpserver.ToolResult {
	t.Helper()
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var o mcpserver.ToolResult
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatalf("structured content %s: %v", raw, err)
	}
	return o
}

// mustError checks a refusal's code.
func mustError(t *testing.T, res *mcp.CallToolResult, code string) mcpserver.ToolResult {
	t.Helper()
	o := toolResult(t, res)
	if !res.IsError || o.Error == nil || o.Error.Code != code {
		t.Fatalf("want error %s, got isError=%v %+v", code, res.IsError, o)
	}
	return o
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
