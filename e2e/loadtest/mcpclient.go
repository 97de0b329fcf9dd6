package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callBound bounds one tools/call: far above the router's own 30 s wait, so that a call that
// never ends is reported, not waited for forever.
const callBound = 2 * time.Minute

// routerClient opens MCP sessions to the router over streamable HTTP with its bearer token,
// all over one connection pool sized for the run's concurrency (the default keeps two idle
// connections per host, and 200 sessions would then open and close connections all the
// time: that would measure the client's TCP handshakes, not the router).
type routerClient struct {
	endpoint string
	http     *http.Client
}

func newRouterClient(endpoint, token string, conns int) *routerClient {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = conns+8, conns+8
	return &routerClient{endpoint: endpoint, http: &http.Client{Transport: bearer{token: token, next: t}}}
}

// bearer sends every request with the token as its bearer credential.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// connect opens one session. The standalone SSE stream is off (the load needs no
// server-initiated messages, and 200 idle GETs would only hold connections), and so are
// reconnects: a transport failure must show as an error, not be retried out of sight.
func (rc *routerClient) connect(ctx context.Context, name string) (*mcp.ClientSession, error) {
	return mcp.NewClient(&mcp.Implementation{Name: name}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: rc.endpoint, HTTPClient: rc.http, DisableStandaloneSSE: true, MaxRetries: -1,
	}, nil)
}

func (rc *routerClient) close() { rc.http.CloseIdleConnections() }

// imageArgs are generate_image's arguments as the model would write them.
type imageArgs struct {
	Prompt string `json:"prompt"`
	Model  string `json:"model"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
}

// spendArgs is a new spend's request: the cheapest model and a small image, with a prompt
// that names the call, so that no two spends of a run ask for the same work.
func spendArgs(prompt string) json.RawMessage {
	b, _ := json.Marshal(imageArgs{Prompt: prompt, Model: "flux-2-klein-4b", Width: 512, Height: 512}) // cannot fail
	return b
}

// spendOutcome is the part of a generate_image result the load test reads.
type spendOutcome struct {
	Status       string `json:"status"`
	PublicHandle string `json:"public_handle"`
	Replayed     bool   `json:"replayed"`
	Result       *struct {
		ImageURL string `json:"image_url"`
	} `json:"result"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// spend sends one generate_image under the trusted call id callID, as Codex sends it, and
// returns its outcome and how long the round trip took. A transport or protocol failure is
// the error; a tool result that is no success is for the caller to judge (problem).
func spend(ctx context.Context, cs *mcp.ClientSession, callID string, args json.RawMessage) (spendOutcome, time.Duration, error) {
	// A new _meta map for every call: the SDK adds its own keys to the one it is given.
	return spendWith(ctx, cs, mcp.Meta{"callId": callID}, args)
}

// spendWith is spend with the call's whole _meta (a new map for each call).
func spendWith(ctx context.Context, cs *mcp.ClientSession, meta mcp.Meta, args json.RawMessage) (spendOutcome, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, callBound)
	defer cancel()
	start := time.Now()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "generate_image", Arguments: args, Meta: meta})
	took := time.Since(start)
	if err != nil {
		return spendOutcome{}, took, err
	}
	var out spendOutcome
	raw, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(raw, &out)
	}
	if err != nil || out.Status == "" {
		return spendOutcome{}, took, fmt.Errorf("generate_image answered without the structured result it declares: %v", err)
	}
	return out, took, nil
}

// problem says what is wrong with a spend's outcome, or "" when it is the success expected:
// succeeded with an image, and a replay exactly when it is a redelivery.
func (o spendOutcome) problem(redelivery bool) string {
	switch {
	case o.Error != nil:
		return fmt.Sprintf("status %s, %s: %s", o.Status, o.Error.Code, o.Error.Message)
	case o.Status != "succeeded":
		return "status " + o.Status
	case o.Result == nil || o.Result.ImageURL == "":
		return "succeeded without an image URL"
	case redelivery && !o.Replayed:
		return "a redelivery that was not answered as a replay"
	case !redelivery && o.Replayed:
		return "a new call answered as a replay"
	}
	return ""
}

// jobID is the provider's job id in a mockflux sample URL, .../samples/<job id>.<format>?exp=…&sig=…
// (services/mockflux/httpserver names the file so).
func jobID(imageURL string) (string, error) {
	u, err := url.Parse(imageURL)
	if err != nil {
		return "", fmt.Errorf("image URL: %v", err)
	}
	dir, file := path.Split(u.Path)
	id, _, ok := strings.Cut(file, ".")
	if !strings.HasSuffix(dir, "/samples/") || !ok || id == "" {
		return "", fmt.Errorf("image URL path %s is not a mockflux sample", u.Path)
	}
	return id, nil
}

// listTools sends one tools/list and returns how long it took: the transport's floor, the
// cost of a round trip through the router's HTTP, bearer check and JSON-RPC with no backend.
func listTools(ctx context.Context, cs *mcp.ClientSession) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, callBound)
	defer cancel()
	start := time.Now()
	res, err := cs.ListTools(ctx, nil)
	took := time.Since(start)
	if err == nil && len(res.Tools) == 0 {
		err = fmt.Errorf("tools/list answered no tools")
	}
	return took, err
}
