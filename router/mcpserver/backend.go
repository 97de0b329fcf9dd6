package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/proto/decisionsig"
	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/router/registry"
	"hubu.dev/hubu/router/scrub"
)

// authorize forwards the spend to Hubu under the private key.
func (r *Router) authorize(ctx context.Context, entry registry.Entry, img contract.ImageRequest) answer {
	body := hubuapi.AuthorizeRequest{
		OperationKey: entry.OperationKey, PublicHandle: entry.PublicHandle, Tool: hubuapi.Tool(entry.Tool), RequestHash: entry.RequestHash,
		Arguments: img,
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
	if op != nil && (op.PublicHandle != entry.PublicHandle || op.RequestHash != entry.RequestHash) {
		// Hubu keeps one record per operation key and refuses another handle or request under
		// it, so this is a fault on the way: never take, or record, another operation's answer
		// as this call's.
		r.cfg.Logger.ErrorContext(ctx, "Hubu answered for another operation or request", "public_handle", entry.PublicHandle)
		return r.unavailable(entry.PublicHandle)
	}
	if op != nil {
		a := r.afterDecision(ctx, *op, resp.HTTPResponse.Header.Get(decisionsig.ReadHeader))
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

// hubuRefusal maps Hubu's problem answers to tool errors, none of them final (see final).
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
		if CallerFrom(ctx).Grant != "" {
			// A person's grant was refused: revoked (by an operator, or by Hubu when a code or
			// refresh token of it was replayed), or the router's own credential was.
			a = refusal(CodeBackendUnavailable, "Hubu refused your sign-in (it was revoked, or this router's credential was); "+
				"sign in again from your client (Hubu recorded nothing and nothing was charged; the same call continues once you have)")
			break
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
//
// readCapability is the read capability Hubu sent with op (decisionsig.ReadHeader), if any:
// the router passes it to Gongbu on its long-polls, which then need not ask Hubu whether this
// credential may read the operation. It never reaches the agent or a log.
func (r *Router) afterDecision(ctx context.Context, op hubuapi.Operation, readCapability string) answer {
	amount := op.AmountMicros
	a := answer{hubu: op.State,
		ToolResult: ToolResult{Status: string(op.State), PublicHandle: op.PublicHandle, AmountMicros: &amount, Currency: op.Currency}}
	switch op.State {
	case hubuapi.OperationStatePendingApproval:
		a.Error = &ToolError{Code: CodeApprovalRequired, Message: "a human must approve this spend; once approved, call resume_operation with the public handle"}
		return a
	case hubuapi.OperationStateApproved:
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
		a.Error = &ToolError{Code: code, Message: msg}
		return a
	case hubuapi.OperationStateFailed:
		// Hubu has settled it: what it captured is what the provider charged, and the rest of
		// the hold is released.
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
	a.readCapability = readCapability
	return r.awaitImage(ctx, a)
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

// awaitImage waits for the execution's result until it is final or Wait runs out. Each look
// at Gongbu is held there until the execution changes (a long-poll that Gongbu ends the
// moment any of its replicas records the change), so the answer comes as soon as the result
// exists, without a fixed polling interval. Hubu has authorized the operation (base is its
// record), so Gongbu being down or answering errors is no refusal: the spend is under way,
// Hubu keeps handing the decision to Gongbu, and the answer is "running", saying that Gongbu
// could not be read.
func (r *Router) awaitImage(ctx context.Context, base answer) answer {
	deadline := r.cfg.Now().Add(r.cfg.Wait)
	unread := "" // why the last look at Gongbu failed; empty when it answered
	var seen *gongbuapi.ExecutionState
	if base.hubu == hubuapi.OperationStateExecuting {
		// Gongbu accepted the decision, and it answers Hubu's hand-off once the provider has
		// the job: the first look may as well wait while the job is submitted. Any other state
		// (still submitting, or already final) answers at once.
		submitted := gongbuapi.Submitted
		seen = &submitted
	}
	var readCapability *string
	if base.readCapability != "" {
		readCapability = &base.readCapability
	}
	for {
		wait := min(int(deadline.Sub(r.cfg.Now())/time.Second), maxGongbuWait)
		asked := r.cfg.Now()
		resp, err := r.cfg.Gongbu.GetOperationExecutionWithResponse(ctx, base.PublicHandle,
			&gongbuapi.GetOperationExecutionParams{Wait: &wait, State: seen, EmbedImage: r.embedImage(), HubuReadCapability: readCapability})
		// A look that failed, or that came back unchanged before its wait was up (a Gongbu that
		// does not hold requests, or a last look with less than a second left), is followed by
		// a pause, not at once by the next.
		early := func() bool { return wait == 0 || r.cfg.Now().Sub(asked) < time.Duration(wait)*time.Second }
		pause := true
		switch {
		case err != nil:
			unread = "Gongbu could not be reached"
		case resp.JSON200 != nil:
			unread = ""
			e := resp.JSON200
			if a, done := r.executed(ctx, base, e); done {
				return a
			}
			pause = seen != nil && *seen == e.State && early()
			seen = &e.State
		case resp.StatusCode() == http.StatusNotFound:
			unread = "" // Hubu has not handed the decision over yet
			pause = seen == nil && early()
			seen = nil
		default:
			unread = fmt.Sprintf("Gongbu answered %d", resp.StatusCode())
		}
		if !r.cfg.Now().Before(deadline) {
			return running(base, unread)
		}
		if !pause {
			continue
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

// maxGongbuWait is the longest, in seconds, that one look asks Gongbu to hold its answer
// (Gongbu's own limit is 30).
const maxGongbuWait = 25

// executed is the answer for an execution Gongbu reports, and whether it is the last word of
// the wait: the execution succeeded, failed or became indeterminate.
func (r *Router) executed(ctx context.Context, base answer, e *gongbuapi.Execution) (answer, bool) {
	a := base
	a.gongbu = e
	switch e.State {
	case gongbuapi.Succeeded:
		a.Status = "succeeded"
		a.ChargedMicros = e.ChargedMicros
		switch {
		case e.Result != nil:
			a.Result, a.image, a.kept = r.result(ctx, base.PublicHandle, e.Result)
			a.Message = "image generated"
		case e.ResolvedAt != nil:
			a.Message = resolvedCharged(e.ChargedMicros)
		default:
			a.Message = "the execution succeeded but Gongbu has no image for it yet: call get_execution with the public handle later"
		}
		return a, true
	case gongbuapi.Failed:
		a.Status = "failed"
		a.ChargedMicros = e.ChargedMicros
		a.Message = "the provider could not produce the image; " + executionFailed(e.ChargedMicros)
		return a, true
	case gongbuapi.Indeterminate:
		a.Status = "indeterminate"
		a.Message = "the provider's outcome is unknown; an operator is reconciling it, and nothing will be charged twice"
		return a, true
	}
	return a, false
}

// running is the answer for a spend Hubu authorized whose result is not there yet; unread
// says why Gongbu could not be read, when it could not.
func running(base answer, unread string) answer {
	a := base
	a.Status = "running"
	a.Message = "still running: call get_execution with the public handle for the result"
	if unread != "" {
		a.Message = "still running: Hubu authorized it (operation " + base.Status + "), but " + unread +
			" to read the result; call get_execution with the public handle later, or deliver the same call again (it is not charged twice)"
	}
	return a
}
