// Package mcpserver is the router's MCP server: the five tools, and for the spend tool the
// whole flow of a call — refuse identity in the arguments, take exactly one trusted identity
// from _meta, hash the intent, resolve it against the registry, forward it under the private
// operation key, scrub the key from the answer, and record the answer once it is final.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"hubu.dev/hubu/kit/failpoint"
	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/router/argguard"
	"hubu.dev/hubu/router/identity"
	"hubu.dev/hubu/router/registry"
	"hubu.dev/hubu/router/reqhash"
	"hubu.dev/hubu/router/scrub"
)

// Config wires a Router. Hubu and Gongbu are generated clients that present the agent's token.
type Config struct {
	Registry *registry.Registry
	Hubu     *hubuapi.ClientWithResponses
	Gongbu   *gongbuapi.ClientWithResponses
	// Identity holds the operator's accepted envelope platforms and their keys; nil accepts
	// Codex and Claude Code identities only.
	Identity *identity.Config
	Logger   *slog.Logger
	// Diagnose, when set, receives one JSON line per call with the shape of its _meta.
	Diagnose io.Writer
	// Wait is how long a spend waits for its image before answering "running".
	Wait time.Duration
	// PollEvery is the pause between two looks at a running execution.
	PollEvery time.Duration
	// ImageLimit is the largest image embedded as MCP image content; larger ones are linked.
	ImageLimit int64
	// Images fetches generated images (the provider's delivery URLs); nil is ImageClient's,
	// which refuses private addresses unless AllowPrivateImageHosts.
	Images *http.Client
	// AllowPrivateImageHosts lets the default Images client download from loopback, private
	// and link-local addresses: for a local stack, whose images are served on loopback.
	AllowPrivateImageHosts bool
	Now                    func() time.Time
}

// Router serves the tools.
type Router struct {
	cfg     Config
	mu      sync.Mutex
	flights map[string]*flight
	diagMu  sync.Mutex
}

type flight struct {
	done    chan struct{}
	hash    string
	scope   string
	answer  answer
	waiters int // concurrent deliveries waiting for this one's answer
}

// New returns a Router.
func New(cfg Config) *Router {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 30 * time.Second
	}
	if cfg.PollEvery <= 0 {
		cfg.PollEvery = 500 * time.Millisecond
	}
	if cfg.ImageLimit <= 0 {
		cfg.ImageLimit = 1 << 20
	}
	if cfg.Images == nil {
		cfg.Images = ImageClient(cfg.AllowPrivateImageHosts, 30*time.Second, cfg.Logger)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Router{cfg: cfg, flights: map[string]*flight{}}
}

// Server returns an MCP server with the router's tools.
func (r *Router) Server(version string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "hubu-unified-mcp", Version: version}, &mcp.ServerOptions{Logger: r.cfg.Logger})
	s.AddTool(&mcp.Tool{
		Name:        ToolGenerateImage,
		Description: "Generate a FLUX image. Paid: Hubu prices it, may hold it for a human's approval, and charges it once however often the call is delivered.",
		InputSchema: generateImageSchema,
	}, r.generateImage)
	s.AddTool(&mcp.Tool{
		Name:        ToolResumeOperation,
		Description: "Run an operation a human approved, by its public handle. It runs the original request once; resuming again only reports its state.",
		InputSchema: handleSchema,
	}, r.resumeOperation)
	s.AddTool(&mcp.Tool{
		Name:        ToolOperationStatus,
		Description: "The state of an operation by its public handle.",
		InputSchema: handleSchema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, r.operationStatus)
	s.AddTool(&mcp.Tool{
		Name:        ToolCapabilities,
		Description: "What this agent may do: tools, models and prices, budget left, the approval limit, and the identity sources the router accepts.",
		InputSchema: emptySchema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, r.capabilities)
	s.AddTool(&mcp.Tool{
		Name:        ToolGetExecution,
		Description: "The provider's state and result of an operation's execution, by its public handle.",
		InputSchema: handleSchema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, r.getExecution)
	return s
}

// imageArgs is generate_image's input, decoded strictly.
type imageArgs struct {
	Prompt       string  `json:"prompt"`
	Model        string  `json:"model"`
	Width        int     `json:"width"`
	Height       int     `json:"height"`
	Seed         *int64  `json:"seed,omitempty"`
	OutputFormat *string `json:"output_format,omitempty"`
}

var modelRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// imageFields are generate_image's argument names, matched exactly: encoding/json alone
// would also take "Prompt" or "ſeed" for them.
var imageFields = map[string]bool{"prompt": true, "model": true, "width": true, "height": true, "seed": true, "output_format": true}

func parseImageArgs(raw []byte) (imageArgs, error) {
	var a imageArgs
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return a, errors.New("arguments must be an object")
	}
	for k := range fields {
		if !imageFields[k] {
			return a, errors.New("arguments take prompt, model, width, height and optionally seed and output_format, and nothing else")
		}
	}
	str := func(k string, dst *string) error {
		if v, ok := fields[k]; ok && json.Unmarshal(v, dst) != nil {
			return fmt.Errorf("%s must be a string", k)
		}
		return nil
	}
	integer := func(k string) (*int64, error) {
		v, ok := fields[k]
		if !ok {
			return nil, nil
		}
		var n json.Number
		if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) || json.Unmarshal(v, &n) != nil {
			return nil, fmt.Errorf("%s must be an integer", k)
		}
		f, err := n.Float64()
		if err != nil || f != float64(int64(f)) || f < -(1<<53-1) || f > 1<<53-1 {
			return nil, fmt.Errorf("%s must be an integer", k)
		}
		i := int64(f)
		return &i, nil
	}
	if err := str("prompt", &a.Prompt); err != nil {
		return a, err
	}
	if err := str("model", &a.Model); err != nil {
		return a, err
	}
	if _, ok := fields["output_format"]; ok {
		var f string
		if err := str("output_format", &f); err != nil {
			return a, err
		}
		a.OutputFormat = &f
	}
	w, err := integer("width")
	if err != nil {
		return a, err
	}
	h, err := integer("height")
	if err != nil {
		return a, err
	}
	if a.Seed, err = integer("seed"); err != nil {
		return a, err
	}
	side := func(n *int64) bool { return n != nil && *n >= 256 && *n <= 1440 && *n%32 == 0 }
	switch {
	case a.Prompt == "" || utf8.RuneCountInString(a.Prompt) > 4000 || strings.ContainsRune(a.Prompt, 0):
		return a, errors.New("prompt must be 1 to 4000 characters")
	case !modelRE.MatchString(a.Model):
		return a, errors.New("model must be a model name such as flux-dev (see the capabilities tool)")
	case !side(w) || !side(h):
		return a, errors.New("width and height must be multiples of 32 from 256 to 1440")
	case a.Seed != nil && *a.Seed < 0:
		return a, errors.New("seed must be from 0 to 2^53-1")
	case a.OutputFormat != nil && *a.OutputFormat != "png" && *a.OutputFormat != "jpeg":
		return a, errors.New("output_format must be png or jpeg")
	}
	a.Width, a.Height = int(*w), int(*h)
	return a, nil
}

func argsOf(req *mcp.CallToolRequest) []byte {
	if req.Params == nil || len(req.Params.Arguments) == 0 {
		return []byte("{}")
	}
	return req.Params.Arguments
}

func metaOf(req *mcp.CallToolRequest) map[string]any {
	if req.Params == nil {
		return nil
	}
	return req.Params.Meta
}

// checkArguments refuses identity in the arguments (at any depth) and malformed JSON;
// it runs before anything else, for every tool.
func checkArguments(args []byte) *answer {
	err := argguard.Check(args)
	var idErr *argguard.IdentityError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &idErr):
		a := refusal(CodeIdentityInArguments, "%s", idErr.Error())
		return &a
	default:
		a := refusal(CodeInvalidArguments, "the arguments are not valid JSON")
		return &a
	}
}

// generateImage is the spend tool.
func (r *Router) generateImage(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args := argsOf(req)
	if a := checkArguments(args); a != nil {
		r.diagnose(req, a.Error.Code)
		return a.toResult(), nil
	}
	id, err := identity.Normalize(metaOf(req), r.cfg.Identity)
	if err != nil {
		code, msg := identity.DescribeError(err)
		r.diagnose(req, code)
		return refusal(code, "%s", msg).toResult(), nil
	}
	digest, _, err := reqhash.Hash(ToolGenerateImage, args)
	if err != nil {
		r.diagnose(req, "accepted:"+id.Platform)
		return refusal(CodeInvalidArguments, "%s", err.Error()).toResult(), nil
	}
	// A version 2 envelope is signed for one installation and one request, which Normalize
	// cannot know: refuse it anywhere else before the registry records anything.
	if err := id.Binding.Check(r.cfg.Registry.InstallationID(), digest.String()); err != nil {
		code, msg := identity.DescribeError(err)
		r.diagnose(req, code)
		return refusal(code, "%s", msg).toResult(), nil
	}
	r.diagnose(req, "accepted:"+id.Platform)
	img, err := parseImageArgs(args)
	if err != nil {
		return refusal(CodeInvalidArguments, "%s", err.Error()).toResult(), nil
	}
	call := registry.Call{Platform: id.Platform, CallID: id.CallID, Scope: id.Scope, Tool: ToolGenerateImage, RequestHash: digest.String()}
	// The work is shared with concurrent deliveries of the same call, so it must not end
	// when this delivery's client goes away; it is bounded on its own.
	work, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.Wait+2*time.Minute)
	defer cancel()
	return r.coalesce(call, func() answer { return r.spend(work, call, img) }).toResult(), nil
}

// coalesce lets one delivery of a call work while concurrent deliveries of the same call
// and request wait for it and share its answer.
func (r *Router) coalesce(call registry.Call, work func() answer) answer {
	key := call.Platform + "\x00" + call.CallID
	r.mu.Lock()
	if f, ok := r.flights[key]; ok {
		f.waiters++
		r.mu.Unlock()
		<-f.done
		if f.hash == call.RequestHash && f.scope == call.Scope {
			shared := f.answer
			shared.Replayed = true
			return shared
		}
		return work() // another request or conversation under the same call id: the registry refuses it
	}
	f := &flight{done: make(chan struct{}), hash: call.RequestHash, scope: call.Scope}
	r.flights[key] = f
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.flights, key)
		r.mu.Unlock()
		close(f.done)
	}()
	f.answer = work()
	return f.answer
}

// spend resolves a call against the registry and forwards it when it is new or unfinished.
func (r *Router) spend(ctx context.Context, call registry.Call, img imageArgs) answer {
	entry, outcome, err := r.cfg.Registry.Resolve(ctx, call)
	switch {
	case errors.Is(err, registry.ErrNewOperationRefused):
		return refusal(CodeDenied, "this router starts new operations only for Codex calls (preallocated keys)")
	case errors.Is(err, registry.ErrNoKeysLeft):
		r.cfg.Logger.ErrorContext(ctx, "no preallocated operation keys are left")
		return refusal(CodeBackendUnavailable, "this router has no preallocated operation keys left; nothing was sent, retry later")
	case err != nil:
		r.cfg.Logger.ErrorContext(ctx, "registry unavailable", "err", err)
		return refusal(CodeBackendUnavailable, "the router's registry is unavailable; nothing was sent, retry the same call")
	}
	log := r.cfg.Logger.With("tool", call.Tool, "platform", call.Platform, "resolution", outcome.String())
	switch outcome {
	case registry.Conflict:
		log.InfoContext(ctx, "call refused")
		return refusal(CodeCallReused, "this call was already used for a different request; a changed request needs a new tool call")
	case registry.ScopeConflict:
		log.WarnContext(ctx, "call refused: its id was first seen in another conversation")
		return refusal(CodeIdentityConflict, "this call's id was already used in another conversation, so it cannot tell this call "+
			"from that one; nothing was sent or charged, and the earlier call is not replayed (the model or proxy that "+
			"made the tool-call id repeated it: it needs a new, unique id)")
	case registry.Replay:
		a, err := unmarshalAnswer(entry.Result)
		if err != nil {
			log.ErrorContext(ctx, "stored result unreadable", "err", err)
			return refusal(CodeBackendUnavailable, "the recorded result of this call cannot be read")
		}
		a.Replayed = true
		log.InfoContext(ctx, "call replayed", "public_handle", a.PublicHandle)
		return a
	}
	failpoint.Inject(failpoint.RouterAfterRegistryInsert)
	log.InfoContext(ctx, "call forwarded", "public_handle", entry.PublicHandle)
	a := r.authorize(ctx, entry, img)
	failpoint.Inject(failpoint.RouterAfterBackendAnswer)
	a = r.scrubbed(ctx, a, entry.OperationKey)
	if a.final {
		b, err := a.marshal()
		if err == nil {
			err = r.cfg.Registry.Finish(ctx, call, b)
		}
		if err != nil {
			log.ErrorContext(ctx, "could not record the final result; a redelivery will ask again", "err", err)
		}
	}
	return a
}

// authorize forwards the spend to Hubu under the private key.
func (r *Router) authorize(ctx context.Context, entry registry.Entry, img imageArgs) answer {
	body := hubuapi.AuthorizeRequest{
		OperationKey: entry.OperationKey, PublicHandle: entry.PublicHandle, Tool: hubuapi.GenerateImage, RequestHash: entry.RequestHash,
		Arguments: hubuapi.GenerateImageArguments{Prompt: img.Prompt, Model: img.Model, Width: img.Width, Height: img.Height, Seed: img.Seed},
	}
	if img.OutputFormat != nil {
		f := hubuapi.GenerateImageArgumentsOutputFormat(*img.OutputFormat)
		body.Arguments.OutputFormat = &f
	}
	resp, err := r.cfg.Hubu.AuthorizeWithResponse(ctx, body)
	if err != nil {
		r.cfg.Logger.WarnContext(ctx, "Hubu unreachable", "err", scrub.String(err.Error(), entry.OperationKey))
		return r.unavailable(entry.PublicHandle)
	}
	op := resp.JSON201
	if op == nil {
		op = resp.JSON200
	}
	if op != nil {
		a := r.afterDecision(ctx, *op)
		a.Replayed = a.Replayed || resp.HTTPResponse.Header.Get("Idempotent-Replayed") == "true"
		return a
	}
	return r.hubuRefusal(ctx, resp.StatusCode(), resp.Body, entry.PublicHandle)
}

func (r *Router) unavailable(handle string) answer {
	a := refusal(CodeBackendUnavailable, "Hubu cannot be reached; the call is recorded, so retrying the same call continues the same operation")
	a.PublicHandle = handle
	return a
}

// hubuRefusal maps Hubu's problem answers to tool errors. None of them is final: Hubu wrote
// nothing for the request it refused, and the operation the key may already stand for (a
// create_new_operation or conflict can answer a delivery whose first one was recorded) may
// still go on, so a later delivery of the call asks Hubu again, under the same key.
func (r *Router) hubuRefusal(ctx context.Context, status int, body []byte, handle string) answer {
	var p hubuapi.Problem
	_ = json.Unmarshal(body, &p)
	detail := ""
	if p.Detail != nil {
		detail = *p.Detail
	}
	var a answer
	switch {
	case p.Code == hubuapi.CreateNewOperation:
		a = refusal(CodeCreateNewOperation, "%s", detail)
	case p.Code == hubuapi.NotFound:
		a = refusal(CodeNotFound, "no such operation")
	case status == http.StatusBadRequest:
		a = refusal(CodeInvalidArguments, "%s", detail)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		r.cfg.Logger.WarnContext(ctx, "Hubu refused the router's credential", "status", status, "code", string(p.Code))
		why := ""
		switch p.Code {
		case hubuapi.CredentialRevoked:
			why = ": an operator revoked it"
		case hubuapi.CredentialExpired:
			why = ": it was replaced and its overlap has ended"
		}
		a = refusal(CodeBackendUnavailable, "Hubu refused this router's agent token%s; an operator must issue a new one and set HUBU_AGENT_TOKEN "+
			"(Hubu recorded nothing and nothing was charged; the same call continues once the router has a valid token)", why)
	case p.Code == hubuapi.Conflict:
		a = refusal(CodeBackendUnavailable, "Hubu refused the request: %s", detail)
	default:
		r.cfg.Logger.WarnContext(ctx, "Hubu answered with an error", "status", status, "code", string(p.Code))
		a = r.unavailable(handle)
	}
	a.PublicHandle = handle
	return a
}

// afterDecision shapes Hubu's record of an operation, waiting a while for the image of one
// that is executing.
func (r *Router) afterDecision(ctx context.Context, op hubuapi.Operation) answer {
	amount := op.AmountMicros
	base := Outcome{Status: string(op.State), PublicHandle: op.PublicHandle, AmountMicros: &amount, Currency: op.Currency}
	switch op.State {
	case hubuapi.OperationStatePendingApproval:
		a := answer{Outcome: base}
		a.Error = &ToolError{Code: CodeApprovalRequired, Message: "a human must approve this spend; once approved, call resume_operation with the public handle"}
		return a
	case hubuapi.OperationStateApproved:
		a := answer{Outcome: base}
		a.Message = "approved: call resume_operation with the public handle to run it"
		return a
	case hubuapi.OperationStateDenied, hubuapi.OperationStateExpired:
		code, msg := CodeDenied, "the spend was refused"
		if op.Denial != nil {
			msg = op.Denial.Message
			if op.Denial.Code == hubuapi.DenialCodeBudgetExceeded {
				code = CodeBudgetExceeded
			}
		}
		a := answer{Outcome: base, final: true}
		a.Error = &ToolError{Code: code, Message: msg}
		return a
	case hubuapi.OperationStateFailed:
		// Hubu has settled it: what it captured is what the provider charged, and the rest of
		// the hold is released.
		a := answer{Outcome: base, final: true}
		charged := op.CapturedMicros
		a.ChargedMicros = &charged
		a.Message = "the provider could not produce the image; "
		if charged == 0 {
			a.Message += "nothing was charged"
			if op.ReleasedMicros > 0 {
				a.Message += fmt.Sprintf(" and the hold of %d micros was released", op.ReleasedMicros)
			}
		} else {
			a.Message += fmt.Sprintf("the provider charged %d micros for the attempt, and they were captured", charged)
			if op.ReleasedMicros > 0 {
				a.Message += fmt.Sprintf("; the other %d micros of the hold were released", op.ReleasedMicros)
			}
		}
		if op.FailureReason != nil {
			a.Message += ". Reason: " + *op.FailureReason
		}
		return a
	}
	return r.awaitImage(ctx, base)
}

// resolvedCharged says what an execution an operator resolved as charged (`gongbu resolve
// --charged-micros`) means for the agent: it succeeded as far as money goes, but Gongbu never
// got an image, and never will.
func resolvedCharged(charged *int64) string {
	amount := "what the provider charged"
	if charged != nil {
		amount = fmt.Sprintf("%d micros", *charged)
	}
	return "no image is available: the provider's outcome was unknown, and an operator who checked with the provider " +
		"confirmed it charged " + amount + " for this operation, which Hubu captures as a success; Gongbu never received the image"
}

// executionFailed says what was charged for an execution Gongbu recorded as failed.
func executionFailed(charged *int64) string {
	switch {
	case charged == nil:
		return "what the provider charged is not known yet: call operation_status with the public handle"
	case *charged == 0:
		return "nothing was charged, and Hubu releases the hold"
	default:
		return fmt.Sprintf("the provider charged %d micros for the attempt, which Hubu captures, releasing the rest of the hold", *charged)
	}
}

// awaitImage polls Gongbu for the execution until it has a result or Wait runs out. Hubu has
// authorized the operation (base.Status is its state), so Gongbu being down or answering
// errors is no refusal: the spend is under way, Hubu keeps handing the decision to Gongbu, and
// the answer is "running", saying that Gongbu could not be read.
func (r *Router) awaitImage(ctx context.Context, base Outcome) answer {
	hubuState := base.Status
	deadline := r.cfg.Now().Add(r.cfg.Wait)
	unread := "" // why the last look at Gongbu failed; empty when it answered
	for {
		resp, err := r.cfg.Gongbu.GetOperationExecutionWithResponse(ctx, base.PublicHandle)
		switch {
		case err != nil:
			unread = "Gongbu could not be reached"
		case resp.JSON200 != nil:
			unread = ""
			e := resp.JSON200
			switch e.State {
			case gongbuapi.Succeeded:
				a := answer{Outcome: base}
				a.Status = "succeeded"
				a.ChargedMicros = e.ChargedMicros
				if e.Result == nil {
					if e.ResolvedAt != nil {
						// Nothing about it can change once Hubu has settled it: there is no
						// image to wait for.
						a.Message = resolvedCharged(e.ChargedMicros)
						a.final = hubuState == string(hubuapi.OperationStateSucceeded)
						return a
					}
					a.Message = "the execution succeeded but Gongbu has no image for it yet: call get_execution with the public handle later"
					return a
				}
				a.Result = &ImageResult{ImageURL: e.Result.ImageUrl}
				var complete bool
				a.image, a.Result.MIMEType, complete = r.fetchImage(ctx, e.Result.ImageUrl)
				// Only the embedded image is the last word. A download that failed, or an
				// image too large to embed, leaves a link that expires: a redelivery asks
				// again rather than replaying it.
				a.final = complete && len(a.image) > 0
				a.Message = "image generated"
				return a
			case gongbuapi.Failed:
				// Final for the execution, but Hubu may not have settled the operation yet
				// (it captures what the provider charged for failed work): Hubu's failed
				// record, which a redelivery gets, is the final answer.
				a := answer{Outcome: base}
				a.Status = "failed"
				a.ChargedMicros = e.ChargedMicros
				a.Message = "the provider could not produce the image; " + executionFailed(e.ChargedMicros)
				return a
			case gongbuapi.Indeterminate:
				a := answer{Outcome: base}
				a.Status = "indeterminate"
				a.Message = "the provider's outcome is unknown; an operator is reconciling it, and nothing will be charged twice"
				return a
			}
		case resp.StatusCode() == http.StatusNotFound:
			unread = "" // Hubu has not handed the decision over yet
		default:
			unread = fmt.Sprintf("Gongbu answered %d", resp.StatusCode())
		}
		if !r.cfg.Now().Before(deadline) {
			return running(base, unread)
		}
		t := time.NewTimer(r.cfg.PollEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return running(base, unread)
		case <-t.C:
		}
	}
}

// running is the answer for a spend Hubu authorized whose result is not there yet; unread
// says why Gongbu could not be read, when it could not.
func running(base Outcome, unread string) answer {
	a := answer{Outcome: base}
	a.Status = "running"
	a.Message = "still running: call get_execution with the public handle for the result"
	if unread != "" {
		a.Message = "still running: Hubu authorized it (operation " + base.Status + "), but " + unread +
			" to read the result; call get_execution with the public handle later, or deliver the same call again (it is not charged twice)"
	}
	return a
}

// fetchImage downloads a small image to embed it; a larger one is only linked. complete is
// false when the download failed (the image may be fetched later), true when the image was
// embedded or is simply too large to embed.
func (r *Router) fetchImage(ctx context.Context, url string) (img []byte, mimeType string, complete bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, "", false
	}
	resp, err := r.cfg.Images.Do(req)
	if err != nil {
		return nil, "", false
	}
	defer resp.Body.Close()
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(mt, "image/") {
		return nil, "", false
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, r.cfg.ImageLimit+1))
	switch {
	case err != nil:
		return nil, mt, false
	case int64(len(b)) > r.cfg.ImageLimit:
		return nil, mt, true
	}
	return b, mt, true
}

// scrubbed removes the private key from every string of the answer.
func (r *Router) scrubbed(ctx context.Context, a answer, key string) answer {
	b, err := json.Marshal(a.Outcome)
	if err == nil {
		b, err = scrub.JSON(b, scrub.Variants(key)...)
	}
	var out Outcome
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		r.cfg.Logger.ErrorContext(ctx, "could not scrub an answer; withholding it", "err", err)
		return refusal(CodeBackendUnavailable, "the answer could not be checked for secrets")
	}
	a.Outcome = out
	return a
}

// handleArgs decodes {"public_handle": ...} strictly.
func handleArgs(args []byte) (string, *answer) {
	var fields map[string]json.RawMessage
	var handle string
	err := json.Unmarshal(args, &fields)
	if err == nil {
		err = json.Unmarshal(fields["public_handle"], &handle)
	}
	if err != nil || len(fields) != 1 || !publicHandleRE.MatchString(handle) {
		a := refusal(CodeInvalidArguments, "arguments must be {\"public_handle\": \"hubu:public-operation:v1:<uuid>\"}")
		return "", &a
	}
	return handle, nil
}

var publicHandleRE = regexp.MustCompile(`^hubu:public-operation:v1:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// privateKeyOf finds the key behind a handle this router made, for scrubbing.
func (r *Router) privateKeyOf(ctx context.Context, handle string) string {
	key, _, err := r.cfg.Registry.OperationKeyFor(ctx, handle)
	if err != nil {
		r.cfg.Logger.WarnContext(ctx, "registry lookup failed", "err", err)
	}
	return key
}

func (r *Router) resumeOperation(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args := argsOf(req)
	r.diagnose(req, "")
	if a := checkArguments(args); a != nil {
		return a.toResult(), nil
	}
	handle, bad := handleArgs(args)
	if bad != nil {
		return bad.toResult(), nil
	}
	resp, err := r.cfg.Hubu.ResumeOperationWithResponse(ctx, handle)
	var a answer
	switch {
	case err != nil:
		a = r.unavailable(handle)
	case resp.JSON200 != nil:
		a = r.afterDecision(ctx, *resp.JSON200)
	default:
		a = r.hubuRefusal(ctx, resp.StatusCode(), resp.Body, handle)
	}
	return r.scrubbed(ctx, a, r.privateKeyOf(ctx, handle)).toResult(), nil
}

func (r *Router) operationStatus(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args := argsOf(req)
	r.diagnose(req, "")
	if a := checkArguments(args); a != nil {
		return a.toResult(), nil
	}
	handle, bad := handleArgs(args)
	if bad != nil {
		return bad.toResult(), nil
	}
	resp, err := r.cfg.Hubu.GetOperationWithResponse(ctx, handle)
	var a answer
	switch {
	case err != nil:
		a = r.unavailable(handle)
	case resp.JSON200 != nil:
		op := resp.JSON200
		amount := op.AmountMicros
		a = answer{Outcome: Outcome{Status: string(op.State), PublicHandle: op.PublicHandle, AmountMicros: &amount, Currency: op.Currency,
			Message: "operation " + string(op.State), Details: map[string]any{
				"held_micros": op.HeldMicros, "captured_micros": op.CapturedMicros, "released_micros": op.ReleasedMicros,
				"approval_expires_at": op.ApprovalExpiresAt, "model": op.Scope.Model, "size": op.Scope.Size,
			}}}
		if op.Denial != nil {
			a.Details["denial"] = op.Denial.Message
		}
	default:
		a = r.hubuRefusal(ctx, resp.StatusCode(), resp.Body, handle)
	}
	return r.scrubbed(ctx, a, r.privateKeyOf(ctx, handle)).toResult(), nil
}

func (r *Router) capabilities(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args := argsOf(req)
	r.diagnose(req, "")
	if a := checkArguments(args); a != nil {
		return a.toResult(), nil
	}
	var none map[string]json.RawMessage
	if err := json.Unmarshal(args, &none); err != nil || len(none) > 0 {
		return refusal(CodeInvalidArguments, "capabilities takes no arguments").toResult(), nil
	}
	resp, err := r.cfg.Hubu.GetCapabilitiesWithResponse(ctx)
	if err != nil {
		return r.unavailable("").toResult(), nil
	}
	if resp.JSON200 == nil {
		return r.hubuRefusal(ctx, resp.StatusCode(), resp.Body, "").toResult(), nil
	}
	c := resp.JSON200
	sources := make([]string, 0, len(identity.Sources))
	for _, s := range identity.Sources {
		sources = append(sources, s.Key)
	}
	models := make([]map[string]any, 0, len(c.Prices))
	for _, p := range c.Prices {
		models = append(models, map[string]any{"provider": p.Provider, "model": p.Model, "size": p.Size, "amount_micros": p.AmountMicros, "currency": p.Currency})
	}
	a := answer{Outcome: Outcome{Status: "ok", Message: fmt.Sprintf("%d models; %d of %d micros left this %s; spends above %d micros need approval",
		len(models), c.Budget.RemainingMicros, c.Budget.LimitMicros, c.Budget.Period, c.AutoApproveLimitMicros),
		Details: map[string]any{
			"tools":                        []string{ToolGenerateImage, ToolResumeOperation, ToolOperationStatus, ToolCapabilities, ToolGetExecution},
			"models":                       models,
			"budget":                       c.Budget,
			"auto_approve_limit_micros":    c.AutoApproveLimitMicros,
			"per_operation_ceiling_micros": c.PerOperationCeilingMicros,
			"identity_sources":             sources,
		}}}
	return a.toResult(), nil
}

func (r *Router) getExecution(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args := argsOf(req)
	r.diagnose(req, "")
	if a := checkArguments(args); a != nil {
		return a.toResult(), nil
	}
	handle, bad := handleArgs(args)
	if bad != nil {
		return bad.toResult(), nil
	}
	resp, err := r.cfg.Gongbu.GetOperationExecutionWithResponse(ctx, handle)
	var a answer
	switch {
	case err != nil:
		a = refusal(CodeBackendUnavailable, "Gongbu cannot be reached; try again")
	case resp.JSON200 != nil:
		e := resp.JSON200
		amount := e.AmountMicros
		a = answer{Outcome: Outcome{Status: string(e.State), PublicHandle: handle, AmountMicros: &amount, Currency: e.Currency,
			ChargedMicros: e.ChargedMicros, Message: "execution " + string(e.State)}}
		switch {
		case e.Result != nil:
			a.Result = &ImageResult{ImageURL: e.Result.ImageUrl}
			a.image, a.Result.MIMEType, _ = r.fetchImage(ctx, e.Result.ImageUrl)
		case e.State == gongbuapi.Succeeded && e.ResolvedAt != nil:
			a.Message = "execution succeeded; " + resolvedCharged(e.ChargedMicros)
		case e.State == gongbuapi.Failed:
			a.Message = "execution failed; " + executionFailed(e.ChargedMicros)
		}
	case resp.StatusCode() == http.StatusNotFound:
		a = refusal(CodeNotFound, "no execution for that operation (yet)")
	default:
		a = refusal(CodeBackendUnavailable, "Gongbu answered %d", resp.StatusCode())
	}
	return r.scrubbed(ctx, a, r.privateKeyOf(ctx, handle)).toResult(), nil
}
