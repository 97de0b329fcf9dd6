package mcpserver

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"hubu.dev/hubu/kit/failpoint"
	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/proto/decisionsig"
	"hubu.dev/hubu/router/registry"
)

// generateImage is the spend tool.
// spendTool is generate_image's work, or with editing edit_image's: the same identity,
// hashing, approval and exactly-once rules, and arguments checked as the tool takes them.
func (r *Router) spendTool(editing bool) func(context.Context, toolCall) answer {
	return func(ctx context.Context, c toolCall) answer { return r.spendImage(ctx, c, editing) }
}

func (r *Router) spendImage(ctx context.Context, c toolCall, editing bool) answer {
	img, err := parseImageArgs(c.args, editing)
	if err != nil {
		r.countCall(c.call.Tool, ResolutionRefused)
		return refusal(CodeInvalidArguments, "%s", err.Error())
	}
	// The work is shared with concurrent deliveries of the same call, so it must not end
	// when this delivery's client goes away; it is bounded on its own.
	work, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.Wait+2*time.Minute)
	defer cancel()
	return r.coalesce(c.call, func() answer { return r.spend(work, c.call, img) })
}

// flight is a delivery at work, which concurrent deliveries of its call wait for.
type flight struct {
	done    chan struct{}
	hash    string
	scope   string
	answer  answer
	waiters int // concurrent deliveries waiting for this one's answer
}

// coalesce lets one delivery of a call work while concurrent deliveries of the same call
// and request wait for it and share its answer.
func (r *Router) coalesce(call registry.Call, work func() answer) answer {
	key := flightKey(call)
	r.mu.Lock()
	if f, ok := r.flights[key]; ok {
		f.waiters++
		r.mu.Unlock()
		<-f.done
		if f.hash == call.RequestHash && f.scope == call.Scope {
			r.countCall(call.Tool, registry.Replay.String()) // answered as a redelivery is
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

// flightKey is the call a delivery is of, as the registry keys it: with its agent, so that a
// delivery never waits for, nor shares the answer of, another agent's call with the same id.
func flightKey(call registry.Call) string {
	return call.Agent + "\x00" + call.Platform + "\x00" + call.CallID
}

// spend resolves a call against the registry, forwards it when it is new or unfinished, and
// records its answer once that is final.
func (r *Router) spend(ctx context.Context, call registry.Call, img contract.ImageRequest) answer {
	entry, resolution, err := r.cfg.Registry.Resolve(ctx, call)
	switch {
	case errors.Is(err, registry.ErrNewOperationRefused):
		r.countCall(call.Tool, ResolutionRefused)
		return refusal(CodeDenied, "this router starts new operations only for Codex calls (preallocated keys)")
	case errors.Is(err, registry.ErrNoKeysLeft):
		r.countCall(call.Tool, ResolutionUnavailable)
		r.cfg.Logger.ErrorContext(ctx, "no preallocated operation keys are left")
		return refusal(CodeBackendUnavailable, "this router has no preallocated operation keys left; nothing was sent, retry later")
	case err != nil:
		r.countCall(call.Tool, ResolutionUnavailable)
		r.cfg.Logger.ErrorContext(ctx, "registry unavailable", "err", err)
		return refusal(CodeBackendUnavailable, "the router's registry is unavailable; nothing was sent, retry the same call")
	}
	r.countCall(call.Tool, resolution.String())
	log := r.cfg.Logger.With("tool", call.Tool, "platform", call.Platform, "resolution", resolution.String())
	switch resolution {
	case registry.Conflict:
		log.InfoContext(ctx, "call refused")
		return refusal(CodeCallReused, "this call was already used for a different request; a changed request needs a new tool call")
	case registry.ScopeConflict:
		log.WarnContext(ctx, "call refused: its id was first seen in another conversation")
		return refusal(CodeIdentityConflict, "this call's id was already used in another conversation, so it cannot tell this call "+
			"from that one; nothing was sent or charged, and the earlier call is not replayed (the model or proxy that "+
			"made the tool-call id repeated it: it needs a new, unique id)")
	case registry.Replay:
		a, err := recordedAnswer(entry)
		if err != nil {
			log.ErrorContext(ctx, "stored result unreadable", "err", err)
			return refusal(CodeBackendUnavailable, "the recorded result of this call cannot be read")
		}
		a.Replayed = true
		a = r.withKeptImage(ctx, a)
		// Written off the answer's path: a redelivery should cost little more than the
		// transport, and under make loadtest a synchronous write of this line took a quarter
		// of the tool handler's time. Nothing moves on a replay, so a line a crash loses right
		// after the answer loses nothing.
		go log.InfoContext(ctx, "call replayed", "public_handle", a.PublicHandle)
		return a
	}
	failpoint.Inject(failpoint.RouterAfterRegistryInsert)
	log.InfoContext(ctx, "call forwarded", "public_handle", entry.PublicHandle)
	a := r.authorize(ctx, entry, img)
	failpoint.Inject(failpoint.RouterAfterBackendAnswer)
	a = r.scrubbed(ctx, a, entry.OperationKey)
	if a.final() {
		r.record(ctx, log, call, a)
	}
	return a
}

// record writes a call's final answer to the registry.
func (r *Router) record(ctx context.Context, log *slog.Logger, call registry.Call, a answer) {
	b, err := a.marshal()
	var recorded registry.Entry
	if err == nil {
		recorded, err = r.cfg.Registry.Finish(ctx, call, b)
	}
	if err != nil {
		log.ErrorContext(ctx, "could not record the final result; a redelivery will ask again", "err", err)
		return
	}
	// The registry keeps the answer as recorded in memory for the redeliveries to come (when
	// it is small enough); decoding it now spares the first of them that work.
	recorded.Warm(decodeAnswer)
}

// resumeOperation runs an operation a human approved, and then waits for its image as a
// spend does.
func (r *Router) resumeOperation(ctx context.Context, handle string) answer {
	resp, err := r.cfg.Hubu.ResumeOperationWithResponse(ctx, handle)
	switch {
	case err != nil:
		return r.unavailable(handle)
	case resp.JSON200 != nil:
		return r.afterDecision(ctx, *resp.JSON200, resp.HTTPResponse.Header.Get(decisionsig.ReadHeader))
	}
	return r.hubuRefusal(ctx, resp.StatusCode(), resp.Body, handle)
}
