// Package routertest is a fake Hubu and Gongbu for the router's tests: real HTTP servers
// speaking the generated server interfaces, that count every request, remember the
// operation keys they were sent, and answer what the test scripts. Only tests import it.
package routertest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/proto/hubuapi"
)

// Backend is the fake Hubu (HubuURL) and Gongbu (GongbuURL).
type Backend struct {
	HubuURL, GongbuURL, ImageURL string
	// Token is the agent token both expect.
	Token string

	mu sync.Mutex
	// keys lists the operation key of every authorization, in order.
	keys []string
	// handles maps an operation key to the public handle it came with.
	handles map[string]string
	calls   map[string]int
	decide  func(req hubuapi.AuthorizeRequest) (status int, op *hubuapi.Operation, problem *hubuapi.Problem)
	// echoKey makes the fake put the last operation key it saw into every string it returns.
	echoKey bool
	// kept is the image the fake Gongbu keeps for every execution (nil: none, as a Gongbu
	// whose download failed, or one from before results by reference).
	kept []byte
	// preview is the kept image's preview, a JPEG of previewSide×previewSide (nil: none).
	preview     []byte
	previewSide int
	down        bool
	block       chan struct{}
}

// Block makes authorizations wait, after they were counted, until the returned function is
// called: a test can then kill the router while its request is in flight.
func (b *Backend) Block() (release func()) {
	ch := make(chan struct{})
	b.locked(func() { b.block = ch })
	var once sync.Once
	return func() {
		once.Do(func() {
			b.locked(func() { b.block = nil })
			close(ch)
		})
	}
}

// Decision answers an authorization.
type Decision func(req hubuapi.AuthorizeRequest) (status int, op *hubuapi.Operation, problem *hubuapi.Problem)

// locked runs f under the lock the handlers take.
func (b *Backend) locked(f func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f()
}

// SetDecide replaces how authorizations are answered; by default they are approved (executing).
func (b *Backend) SetDecide(d Decision) { b.locked(func() { b.decide = d }) }

// SetEchoKey makes every answer carry the last operation key in its free-text fields.
func (b *Backend) SetEchoKey(on bool) { b.locked(func() { b.echoKey = on }) }

// Keys is the operation key of every authorization so far, in order.
func (b *Backend) Keys() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.keys...)
}

// New starts the fake on loopback; it stops when the test ends.
func New(t testing.TB) *Backend {
	t.Helper()
	b := &Backend{Token: "hubu_agent_test", handles: map[string]string{}, calls: map[string]int{}, kept: TinyPNG()}
	hubu := httptest.NewServer(b.guard(hubuapi.Handler(&fakeHubu{b: b})))
	t.Cleanup(hubu.Close)
	gongbu := httptest.NewServer(b.guard(gongbuapi.Handler(&fakeGongbu{b: b})))
	t.Cleanup(gongbu.Close)
	img := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.count("image")
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(TinyPNG())
	}))
	t.Cleanup(img.Close)
	b.locked(func() { // the handlers read ImageURL under the lock
		b.HubuURL, b.GongbuURL, b.ImageURL = hubu.URL, gongbu.URL, img.URL+"/sample.png"
	})
	return b
}

func (b *Backend) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		down := b.down
		b.mu.Unlock()
		if down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+b.Token {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"type":"x","title":"Unauthorized","status":401,"code":"unauthorized"}`))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (b *Backend) count(what string) { b.locked(func() { b.calls[what]++ }) }

// Calls is how many requests of a kind arrived: authorize, resume, status, capabilities,
// execution, image (from the provider's link), kept_image (from Gongbu); "" is every backend
// request but the images.
func (b *Backend) Calls(what string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if what != "" {
		return b.calls[what]
	}
	n := 0
	for k, v := range b.calls {
		if k != "image" && k != "kept_image" {
			n += v
		}
	}
	return n
}

// SetKept makes the fake Gongbu keep img for every execution, and serve it; nil keeps none,
// so results link to the provider (by default it keeps TinyPNG).
func (b *Backend) SetKept(img []byte) { b.locked(func() { b.kept, b.preview = img, nil }) }

// SetKeptWithPreview makes the fake Gongbu keep img with preview, a side×side JPEG, as Gongbu
// keeps an image larger than 512 KiB.
func (b *Backend) SetKeptWithPreview(img, preview []byte, side int) {
	b.locked(func() { b.kept, b.preview, b.previewSide = img, preview, side })
}

// SetImageURL makes the fake Gongbu's results point at url.
func (b *Backend) SetImageURL(url string) { b.locked(func() { b.ImageURL = url }) }

// SetDown makes the backends unreachable-ish (503) or back.
func (b *Backend) SetDown(down bool) { b.locked(func() { b.down = down }) }

// Operation builds a record in state for a request.
func Operation(req hubuapi.AuthorizeRequest, state hubuapi.OperationState) *hubuapi.Operation {
	now := time.Now().UTC()
	id := uuid.New()
	return &hubuapi.Operation{
		PublicHandle: req.PublicHandle, AgentId: uuid.New(), Tool: req.Tool, State: state, AmountMicros: 25_000, Currency: "USD",
		Account: "acct:test", Scope: hubuapi.Scope{Provider: "bfl", Model: req.Arguments.Model, Size: "1024x1024"},
		Arguments: req.Arguments, RequestHash: req.RequestHash, DecisionId: &id, HeldMicros: 25_000, CreatedAt: now, UpdatedAt: now,
	}
}

func (b *Backend) echo(v any) any {
	if !b.echoKey || len(b.keys) == 0 {
		return v
	}
	key := b.keys[len(b.keys)-1]
	raw, _ := json.Marshal(v)
	var m any
	_ = json.Unmarshal(raw, &m)
	// Free-text fields carry the key; ids, hashes, times and enums must stay as they are (the
	// router refuses an operation whose handle or request hash is not its call's).
	structural := map[string]bool{"agent_id": true, "decision_id": true, "public_handle": true, "request_hash": true, "state": true, "tool": true,
		"created_at": true, "updated_at": true, "approval_expires_at": true, "period_start": true, "code": true, "period": true, "kind": true, "data": true}
	var walk func(string, any) any
	walk = func(name string, x any) any {
		switch y := x.(type) {
		case string:
			if structural[name] {
				return y
			}
			return y + " " + key
		case []any:
			for i := range y {
				y[i] = walk(name, y[i])
			}
		case map[string]any:
			for k := range y {
				y[k] = walk(k, y[k])
			}
			y["leak_"+key] = key
		}
		return x
	}
	return walk("", m)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	ct := "application/json"
	if _, ok := v.(*hubuapi.Problem); ok {
		ct = "application/problem+json"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

type fakeHubu struct {
	hubuapi.Unimplemented
	b *Backend
}

func (f *fakeHubu) Authorize(w http.ResponseWriter, r *http.Request) {
	f.b.count("authorize")
	var req hubuapi.AuthorizeRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, 400, &hubuapi.Problem{Code: hubuapi.InvalidArguments, Status: 400, Title: "Bad Request", Type: "x"})
		return
	}
	f.b.mu.Lock()
	f.b.keys = append(f.b.keys, req.OperationKey)
	_, seen := f.b.handles[req.OperationKey]
	f.b.handles[req.OperationKey] = req.PublicHandle
	decide, block := f.b.decide, f.b.block
	f.b.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-r.Context().Done():
			return
		}
	}
	status, op, problem := http.StatusCreated, Operation(req, hubuapi.OperationStateExecuting), (*hubuapi.Problem)(nil)
	if decide != nil {
		status, op, problem = decide(req)
	}
	if seen && status == http.StatusCreated {
		status = http.StatusOK
		w.Header().Set("Idempotent-Replayed", "true")
	}
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	if problem != nil {
		writeJSON(w, status, f.b.echo(problem))
		return
	}
	writeJSON(w, status, f.b.echo(op))
}

func (f *fakeHubu) handleOp(w http.ResponseWriter, kind, handle string) {
	f.b.count(kind)
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	for key, h := range f.b.handles {
		if h == handle {
			op := Operation(hubuapi.AuthorizeRequest{PublicHandle: handle, OperationKey: key, Tool: hubuapi.GenerateImage,
				Arguments: contract.ImageRequest{Prompt: "p", Model: "flux-dev", Width: 1024, Height: 1024}}, hubuapi.OperationStateExecuting)
			writeJSON(w, 200, f.b.echo(op))
			return
		}
	}
	writeJSON(w, 404, &hubuapi.Problem{Code: hubuapi.NotFound, Status: 404, Title: "Not Found", Type: "x"})
}

func (f *fakeHubu) ResumeOperation(w http.ResponseWriter, r *http.Request, handle string) {
	f.handleOp(w, "resume", handle)
}

func (f *fakeHubu) GetOperation(w http.ResponseWriter, r *http.Request, handle string) {
	f.handleOp(w, "status", handle)
}

func (f *fakeHubu) GetCapabilities(w http.ResponseWriter, r *http.Request) {
	f.b.count("capabilities")
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	writeJSON(w, 200, f.b.echo(hubuapi.Capabilities{AgentId: uuid.New(), AgentName: "agent", Account: "acct:test", Tools: []hubuapi.Tool{hubuapi.GenerateImage},
		Prices:                 []hubuapi.Price{{Provider: "bfl", Model: "flux-dev", Size: "*", AmountMicros: 25_000, Currency: "USD", UpdatedAt: time.Now()}},
		Budget:                 hubuapi.Budget{Period: hubuapi.BudgetPeriodDay, PeriodStart: time.Now(), LimitMicros: 5_000_000, RemainingMicros: 5_000_000, Currency: "USD"},
		AutoApproveLimitMicros: 50_000, PerOperationCeilingMicros: 1_000_000}))
}

type fakeGongbu struct {
	gongbuapi.Unimplemented
	b *Backend
}

// GetOperationExecution answers a succeeded execution, embedding the kept image when asked
// to and it is small enough, as Gongbu does.
func (f *fakeGongbu) GetOperationExecution(w http.ResponseWriter, r *http.Request, handle string, params gongbuapi.GetOperationExecutionParams) {
	f.b.count("execution")
	now := time.Now()
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	result := &gongbuapi.ExecutionResult{ImageUrl: f.b.ImageURL}
	if f.b.kept != nil {
		sum := sha256.Sum256(f.b.kept)
		result.Image = &gongbuapi.KeptImage{MimeType: gongbuapi.KeptImageMimeTypeImagepng, SizeBytes: int64(len(f.b.kept)), Sha256: hex.EncodeToString(sum[:])}
		if f.b.preview != nil {
			psum := sha256.Sum256(f.b.preview)
			result.Image.Preview = &gongbuapi.KeptPreview{MimeType: gongbuapi.KeptPreviewMimeTypeImagejpeg, SizeBytes: int64(len(f.b.preview)),
				Sha256: hex.EncodeToString(psum[:]), Width: f.b.previewSide, Height: f.b.previewSide}
		}
		switch limit := params.EmbedImage; {
		case limit != nil && *limit >= int64(len(f.b.kept)):
			img := bytes.Clone(f.b.kept)
			result.Image.Data = &img
		case limit != nil && f.b.preview != nil && *limit >= int64(len(f.b.preview)):
			img := bytes.Clone(f.b.preview)
			result.Image.Preview.Data = &img
		}
	}
	writeJSON(w, 200, f.b.echo(gongbuapi.Execution{DecisionId: uuid.New(), PublicHandle: handle, AgentId: uuid.New(),
		Scope: gongbuapi.Scope{Provider: "bfl", Model: "flux-dev", Size: "1024x1024"}, State: gongbuapi.Succeeded,
		AmountMicros: 25_000, Currency: "USD", Result: result, CreatedAt: now, UpdatedAt: now}))
}

func (f *fakeGongbu) GetOperationImage(w http.ResponseWriter, r *http.Request, handle string, params gongbuapi.GetOperationImageParams) {
	f.b.count("kept_image")
	f.b.mu.Lock()
	img, mimeType := f.b.kept, "image/png"
	if params.Preview != nil && *params.Preview {
		img, mimeType = f.b.preview, "image/jpeg"
	}
	if !slices.Contains(slices.Collect(maps.Values(f.b.handles)), handle) {
		img = nil // an operation this backend never authorized
	}
	f.b.mu.Unlock()
	if img == nil {
		writeJSON(w, http.StatusNotFound, gongbuapi.Problem{Type: "about:blank", Title: "Not Found", Status: 404, Code: gongbuapi.NotFound})
		return
	}
	w.Header().Set("Content-Type", mimeType)
	_, _ = w.Write(img)
}

// TinyPNG is an 8x8 PNG.
func TinyPNG() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for i := range 64 {
		img.Set(i%8, i/8, color.RGBA{R: uint8(i * 4), G: 100, B: 200, A: 255})
	}
	var buf bytes.Buffer
	_ = png.Encode(&buf, img)
	return buf.Bytes()
}

// LeaksIn reports which of the secrets appear in text.
func LeaksIn(text string, secrets ...string) []string {
	var leaks []string
	for _, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			leaks = append(leaks, s)
		}
	}
	return leaks
}
