package mcpserver_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/router/routertest"
)

// The router records an answer as final (and replays it to every later delivery of the
// call without asking a backend) only when nothing about it can change any more. These
// tests script the fake Hubu, a fake Gongbu and the image host through every answer a spend
// can get, and check that after a non-final one the next delivery reaches Hubu again, and
// after a final one it reaches nothing.

// imageMode is how the image host answers.
type imageMode int

const (
	imageOK          imageMode = iota // a small PNG, embedded
	imageServerError                  // 500
	imageNotAnImage                   // 200 with text/html
	imageTooLarge                     // an image above the router's embedding limit
	imageUnreachable                  // nothing listens
)

// keptMode is what Gongbu keeps of a succeeded execution's image.
type keptMode int

const (
	keptNone            keptMode = iota // nothing: the router downloads the provider's link
	keptOK                              // TinyPNG, served
	keptTooLarge                        // an image above the router's embedding limit
	keptUnavailable                     // described, but Gongbu's image endpoint answers 500
	keptCorrupt                         // described, but Gongbu serves other bytes
	keptHang                            // described, but Gongbu's image endpoint never answers
	keptEmbedded                        // TinyPNG, embedded in the execution's answer when asked for
	keptEmbeddedCorrupt                 // other bytes embedded in the answer; the image endpoint serves TinyPNG
)

// testImageLimit is the router's embedding limit in these tests; TinyPNG is well below it.
const testImageLimit = 4 << 10

// scriptedGongbu is a fake Gongbu whose execution answer, and image host, a test sets.
type scriptedGongbu struct {
	gongbuapi.Unimplemented
	url, imageURL, deadURL string

	mu        sync.Mutex
	status    int // an error status to answer with; 0 answers the execution
	state     gongbuapi.ExecutionState
	noResult  bool // a succeeded execution without its result
	charged   *int64
	resolved  bool // an operator resolved the execution (gongbu resolve)
	image     imageMode
	kept      keptMode
	execCalls int
	imgCalls  int
	keptCalls int
}

func newScriptedGongbu(t *testing.T) *scriptedGongbu {
	t.Helper()
	g := &scriptedGongbu{state: gongbuapi.Succeeded}
	srv := httptest.NewServer(gongbuapi.Handler(g))
	t.Cleanup(srv.Close)
	img := httptest.NewServer(http.HandlerFunc(g.serveImage))
	t.Cleanup(img.Close)
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	g.url, g.imageURL, g.deadURL = srv.URL, img.URL+"/sample.png", dead.URL+"/sample.png"
	return g
}

func (g *scriptedGongbu) set(status int, state gongbuapi.ExecutionState, noResult bool, image imageMode) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.status, g.state, g.noResult, g.image = status, state, noResult, image
}

// setCharge sets what the execution says was charged, and whether an operator resolved it.
func (g *scriptedGongbu) setCharge(charged *int64, resolved bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.charged, g.resolved = charged, resolved
}

// setKept sets what Gongbu keeps of the image.
func (g *scriptedGongbu) setKept(k keptMode) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.kept = k
}

// keptFetches is how many kept images were fetched.
func (g *scriptedGongbu) keptFetches() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.keptCalls
}

func (g *scriptedGongbu) GetOperationImage(w http.ResponseWriter, r *http.Request, handle string, _ gongbuapi.GetOperationImageParams) {
	g.mu.Lock()
	g.keptCalls++
	mode := g.kept
	g.mu.Unlock()
	switch mode {
	case keptNone:
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(gongbuapi.Problem{Code: gongbuapi.NotFound, Status: 404, Title: "Not Found", Type: "x"})
	case keptUnavailable:
		http.Error(w, "database hiccup", http.StatusInternalServerError)
	case keptHang:
		<-r.Context().Done() // until the router gives up
	case keptCorrupt:
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(append(routertest.TinyPNG(), 0))
	default:
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(routertest.TinyPNG())
	}
}

// calls is how many execution reads and image downloads arrived.
func (g *scriptedGongbu) calls() (exec, img int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.execCalls, g.imgCalls
}

func (g *scriptedGongbu) GetOperationExecution(w http.ResponseWriter, r *http.Request, handle string, params gongbuapi.GetOperationExecutionParams) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.execCalls++
	if g.status != 0 {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(g.status)
		_ = json.NewEncoder(w).Encode(gongbuapi.Problem{Code: "scripted", Status: g.status, Title: http.StatusText(g.status), Type: "x"})
		return
	}
	now := time.Now()
	x := gongbuapi.Execution{DecisionId: uuid.New(), PublicHandle: handle, AgentId: uuid.New(),
		Scope: gongbuapi.Scope{Provider: "bfl", Model: "flux-dev", Size: "1024x1024"}, State: g.state,
		AmountMicros: 25_000, Currency: "USD", ChargedMicros: g.charged, CreatedAt: now, UpdatedAt: now}
	if g.resolved {
		x.ResolvedAt = &now
	}
	if g.state == gongbuapi.Succeeded && !g.noResult {
		url := g.imageURL
		if g.image == imageUnreachable {
			url = g.deadURL
		}
		x.Result = &gongbuapi.ExecutionResult{ImageUrl: url}
		if g.kept != keptNone {
			img := routertest.TinyPNG()
			sum := sha256.Sum256(img)
			size := int64(len(img))
			if g.kept == keptTooLarge {
				size = testImageLimit + 1
			}
			x.Result.Image = &gongbuapi.KeptImage{MimeType: gongbuapi.KeptImageMimeTypeImagepng, SizeBytes: size, Sha256: hex.EncodeToString(sum[:])}
			if asked := params.EmbedImage; asked != nil && *asked >= size {
				switch g.kept {
				case keptEmbedded:
					x.Result.Image.Data = &img
				case keptEmbeddedCorrupt:
					other := append(routertest.TinyPNG(), 0)
					x.Result.Image.Data = &other
				}
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(x)
}

func (g *scriptedGongbu) serveImage(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	g.imgCalls++
	mode := g.image
	g.mu.Unlock()
	switch mode {
	case imageServerError:
		http.Error(w, "storage hiccup", http.StatusInternalServerError)
	case imageNotAnImage:
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html>sign in</html>"))
	case imageTooLarge:
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(bytes.Repeat([]byte{0x89}, testImageLimit+1))
	default:
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(routertest.TinyPNG())
	}
}

// hubuState answers every authorization with a record in state.
func hubuState(state hubuapi.OperationState, edit func(*hubuapi.Operation)) routertest.Decision {
	return func(req hubuapi.AuthorizeRequest) (int, *hubuapi.Operation, *hubuapi.Problem) {
		op := routertest.Operation(req, state)
		if edit != nil {
			edit(op)
		}
		return http.StatusCreated, op, nil
	}
}

// hubuProblem answers every authorization with a problem.
func hubuProblem(status int, code hubuapi.ErrorCode) routertest.Decision {
	return func(req hubuapi.AuthorizeRequest) (int, *hubuapi.Operation, *hubuapi.Problem) {
		detail := fmt.Sprintf("scripted %d %s", status, code)
		return status, nil, &hubuapi.Problem{Code: code, Status: status, Title: http.StatusText(status), Type: "x", Detail: &detail}
	}
}

type finalityCase struct {
	name string
	hubu routertest.Decision // nil: approved and executing
	// Gongbu's answer, read when Hubu says the operation is executing.
	gongbuStatus int
	gongbuState  gongbuapi.ExecutionState // "" is succeeded
	noResult     bool
	image        imageMode
	kept         keptMode
	// What the first delivery answers.
	wantStatus, wantCode string
	wantMessage          string // a part of the first delivery's error message, if set
	final                bool
	// embedded is whether a replay of a final answer embeds the image (fetched from Gongbu).
	embedded bool
}

var finalityCases = []finalityCase{
	// Hubu refuses: none of these is the last word on the call. The registry keeps the key,
	// and Hubu, idempotent per key, is asked again.
	{name: "hubu 400 invalid_arguments", hubu: hubuProblem(400, hubuapi.InvalidArguments), wantStatus: "refused", wantCode: "invalid_arguments"},
	{name: "hubu 401", hubu: hubuProblem(401, hubuapi.Unauthorized), wantStatus: "refused", wantCode: "backend_unavailable"},
	{name: "hubu 401 credential_revoked", hubu: hubuProblem(401, hubuapi.CredentialRevoked), wantStatus: "refused", wantCode: "backend_unavailable",
		wantMessage: "agent token: an operator revoked it; an operator must issue a new one and set HUBU_AGENT_TOKEN"},
	{name: "hubu 401 credential_expired", hubu: hubuProblem(401, hubuapi.CredentialExpired), wantStatus: "refused", wantCode: "backend_unavailable",
		wantMessage: "agent token: it was replaced and its overlap has ended"},
	{name: "hubu 403", hubu: hubuProblem(403, hubuapi.Forbidden), wantStatus: "refused", wantCode: "backend_unavailable"},
	{name: "hubu 404", hubu: hubuProblem(404, hubuapi.NotFound), wantStatus: "refused", wantCode: "not_found"},
	{name: "hubu 409 create_new_operation", hubu: hubuProblem(409, hubuapi.CreateNewOperation), wantStatus: "refused", wantCode: "create_new_operation"},
	{name: "hubu 409 conflict", hubu: hubuProblem(409, hubuapi.Conflict), wantStatus: "refused", wantCode: "backend_unavailable"},
	{name: "hubu 413", hubu: hubuProblem(413, hubuapi.PayloadTooLarge), wantStatus: "refused", wantCode: "backend_unavailable"},
	{name: "hubu 500", hubu: hubuProblem(500, hubuapi.Internal), wantStatus: "refused", wantCode: "backend_unavailable"},
	{name: "hubu 503", hubu: hubuProblem(503, hubuapi.Unavailable), wantStatus: "refused", wantCode: "backend_unavailable"},

	// Hubu's record of the operation.
	{name: "hubu pending_approval", hubu: hubuState(hubuapi.OperationStatePendingApproval, nil), wantStatus: "pending_approval", wantCode: "approval_required"},
	{name: "hubu approved", hubu: hubuState(hubuapi.OperationStateApproved, nil), wantStatus: "approved"},
	{name: "hubu denied", hubu: hubuState(hubuapi.OperationStateDenied, func(op *hubuapi.Operation) {
		op.Denial = &hubuapi.Denial{Code: hubuapi.DenialCodeDenied, Message: "above the ceiling"}
	}), wantStatus: "denied", wantCode: "denied", final: true},
	{name: "hubu expired", hubu: hubuState(hubuapi.OperationStateExpired, func(op *hubuapi.Operation) {
		op.Denial = &hubuapi.Denial{Code: hubuapi.DenialCodeDenied, Message: "no one approved it in time"}
	}), wantStatus: "expired", wantCode: "denied", final: true},
	{name: "hubu failed (settled)", hubu: hubuState(hubuapi.OperationStateFailed, func(op *hubuapi.Operation) {
		reason := "provider refused the prompt"
		op.FailureReason, op.HeldMicros, op.ReleasedMicros = &reason, 0, 25_000
	}), wantStatus: "failed", final: true},

	// Hubu approved it; the execution at Gongbu.
	{name: "gongbu submitting (running)", gongbuState: gongbuapi.Submitting, wantStatus: "running"},
	{name: "gongbu submitted (running)", gongbuState: gongbuapi.Submitted, wantStatus: "running"},
	{name: "gongbu 404 (not handed over yet)", gongbuStatus: 404, wantStatus: "running"},
	{name: "gongbu 500", gongbuStatus: 500, wantStatus: "running"},
	{name: "gongbu indeterminate", gongbuState: gongbuapi.Indeterminate, wantStatus: "indeterminate"},
	// Gongbu's failed is final for the execution, but Hubu has not settled the operation yet
	// (it may still capture what the provider charged): Hubu's own failed record is the final
	// answer, so the next delivery asks Hubu for it.
	{name: "gongbu failed", gongbuState: gongbuapi.Failed, wantStatus: "failed"},
	// Gongbu keeps the image: the answer is final whether or not it could embed it, because
	// every replay embeds it from Gongbu again; the registry keeps only the reference.
	{name: "gongbu succeeded and keeps the image", kept: keptOK, wantStatus: "succeeded", final: true, embedded: true},
	{name: "gongbu keeps an image too large to embed", kept: keptTooLarge, wantStatus: "succeeded", final: true},
	{name: "gongbu keeps the image but cannot serve it now", kept: keptUnavailable, wantStatus: "succeeded", final: true},
	{name: "gongbu serves an image other than the one it described", kept: keptCorrupt, wantStatus: "succeeded", final: true},
	// Gongbu embeds the kept image in the execution's answer: nothing more to fetch. Bytes
	// other than those it described are not embedded; the router fetches the image instead.
	{name: "gongbu embeds the kept image", kept: keptEmbedded, wantStatus: "succeeded", final: true, embedded: true},
	{name: "gongbu embeds an image other than the one it described", kept: keptEmbeddedCorrupt, wantStatus: "succeeded", final: true, embedded: true},
	// Gongbu keeps no image (its download is still being tried, or it predates results by
	// reference): the provider's link expires, so nothing about the image is final.
	{name: "gongbu succeeded, keeps no image, the provider's link embedded", wantStatus: "succeeded"},
	{name: "gongbu succeeded, image download 500", image: imageServerError, wantStatus: "succeeded"},
	{name: "gongbu succeeded, image not an image", image: imageNotAnImage, wantStatus: "succeeded"},
	{name: "gongbu succeeded, image too large", image: imageTooLarge, wantStatus: "succeeded"},
	{name: "gongbu succeeded, image host unreachable", image: imageUnreachable, wantStatus: "succeeded"},
	{name: "gongbu succeeded without a result", noResult: true, wantStatus: "succeeded"},
}

func TestFinalityOfAnswers(t *testing.T) {
	t.Parallel()
	for i, tc := range finalityCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newScriptedGongbu(t)
			e := setup(t, &options{gongbuURL: g.url, wait: 300 * time.Millisecond, imageLimit: testImageLimit})
			if tc.hubu != nil {
				e.backend.SetDecide(tc.hubu)
			}
			state := tc.gongbuState
			if state == "" {
				state = gongbuapi.Succeeded
			}
			g.set(tc.gongbuStatus, state, tc.noResult, tc.image)
			g.setKept(tc.kept)
			callID := fmt.Sprintf("call_finalIbCQqauinaST3It61%02d", i)

			first := e.call(t, "generate_image", fox, codex(callID))
			o := toolResult(t, first)
			code := ""
			if o.Error != nil {
				code = o.Error.Code
			}
			if o.Status != tc.wantStatus || code != tc.wantCode || o.Replayed {
				t.Fatalf("first delivery: status %q code %q, want %q %q: %+v", o.Status, code, tc.wantStatus, tc.wantCode, o)
			}
			if tc.wantMessage != "" && !strings.Contains(o.Error.Message, tc.wantMessage) {
				t.Fatalf("first delivery: %q does not say %q", o.Error.Message, tc.wantMessage)
			}
			auth := e.backend.Calls("authorize")
			exec, img := g.calls()

			kept := g.keptFetches()
			wantKept := map[keptMode]int{keptEmbedded: 0, keptEmbeddedCorrupt: 1}
			if want, ok := wantKept[tc.kept]; ok && (kept != want || images(first) != 1) {
				t.Fatalf("first delivery: fetched the kept image %d times, want %d; embedded %d images", kept, want, images(first))
			}
			againResult := e.call(t, "generate_image", fox, codex(callID))
			again := toolResult(t, againResult)
			if again.PublicHandle != o.PublicHandle {
				t.Fatalf("redelivery named another operation: %q, want %q", again.PublicHandle, o.PublicHandle)
			}
			exec2, img2 := g.calls()
			if tc.final {
				if !again.Replayed || again.Status != o.Status {
					t.Fatalf("redelivery of a final answer: %+v", again)
				}
				if e.backend.Calls("authorize") != auth || exec2 != exec || img2 != img {
					t.Fatalf("a final answer was not replayed from the registry: authorize %d→%d, execution %d→%d, image %d→%d",
						auth, e.backend.Calls("authorize"), exec, exec2, img, img2)
				}
				if n := images(againResult); (n == 1) != tc.embedded {
					t.Fatalf("the replay embedded %d images, want embedded %v", n, tc.embedded)
				}
				// The router holds an image it embedded; one it could not embed is fetched again.
				want := 0
				if tc.kept == keptUnavailable || tc.kept == keptCorrupt {
					want = 1
				}
				if fetched := g.keptFetches() - kept; fetched != want {
					t.Fatalf("the replay fetched the kept image %d times, want %d", fetched, want)
				}
				return
			}
			if e.backend.Calls("authorize") != auth+1 {
				t.Fatalf("after a non-final %q answer the redelivery did not ask Hubu again (authorize %d→%d)",
					tc.wantStatus, auth, e.backend.Calls("authorize"))
			}
			if keys := e.backend.Keys(); len(keys) != 2 || keys[0] != keys[1] {
				t.Fatalf("the redelivery must continue under the same operation key: %d keys", len(keys))
			}
		})
	}
}

// Hubu answers create_new_operation to one delivery (say, it still priced redeliveries
// against the current catalog), and the original operation then runs and is charged: the
// next delivery must get that result, not a recorded refusal; only then is the call final.
func TestCreateNewOperationThenChargedIsNotStuck(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.backend.SetDecide(hubuState(hubuapi.OperationStatePendingApproval, nil))
	held := mustError(t, e.call(t, "generate_image", fox, codex("call_stuck1YmgARyNAYaCVk7PaBC")), "approval_required")

	e.backend.SetDecide(hubuProblem(409, hubuapi.CreateNewOperation))
	mustError(t, e.call(t, "generate_image", fox, codex("call_stuck1YmgARyNAYaCVk7PaBC")), "create_new_operation")

	// A redelivery refused with create_new_operation is not recorded as final either: the
	// operation first recorded may still go on, so the next delivery asks Hubu again.
	n := e.backend.Calls("authorize")
	e.backend.SetDecide(nil) // approved, resumed elsewhere, executing; Gongbu has the image
	done := e.call(t, "generate_image", fox, codex("call_stuck1YmgARyNAYaCVk7PaBC"))
	if e.backend.Calls("authorize") != n+1 {
		t.Fatal("a refused redelivery was replayed from the registry instead of asking Hubu again")
	}
	if o := toolResult(t, done); done.IsError || o.Status != "succeeded" || o.PublicHandle != held.PublicHandle || o.Result == nil {
		t.Fatalf("after the original ran: %+v", o)
	}
	before := e.backend.Calls("")
	if o := toolResult(t, e.call(t, "generate_image", fox, codex("call_stuck1YmgARyNAYaCVk7PaBC"))); !o.Replayed || o.Status != "succeeded" {
		t.Fatalf("redelivery after success: %+v", o)
	}
	if e.backend.Calls("") != before {
		t.Fatal("a redelivery after the final answer reached a backend")
	}

	// A first delivery refused with create_new_operation (Hubu has the key for other work) is
	// no more final than a redelivery's.
	e.backend.SetDecide(hubuProblem(409, hubuapi.CreateNewOperation))
	mustError(t, e.call(t, "generate_image", fox, codex("call_stuck2NGl4mcx6F8G5eqDNkM")), "create_new_operation")
	n = e.backend.Calls("authorize")
	mustError(t, e.call(t, "generate_image", fox, codex("call_stuck2NGl4mcx6F8G5eqDNkM")), "create_new_operation")
	if e.backend.Calls("authorize") != n+1 {
		t.Fatal("a recorded create_new_operation was replayed instead of asking Hubu again")
	}
}
