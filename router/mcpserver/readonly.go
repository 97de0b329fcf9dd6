package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/router/identity"
)

func (r *Router) operationStatus(ctx context.Context, handle string) answer {
	resp, err := r.cfg.Hubu.GetOperationWithResponse(ctx, handle)
	switch {
	case err != nil:
		return r.unavailable(handle)
	case resp.JSON200 == nil:
		return r.hubuRefusal(ctx, resp.StatusCode(), resp.Body, handle)
	}
	op := resp.JSON200
	amount := op.AmountMicros
	a := answer{ToolResult: ToolResult{Status: string(op.State), PublicHandle: op.PublicHandle, AmountMicros: &amount, Currency: op.Currency,
		Message: "operation " + string(op.State), Details: map[string]any{
			"held_micros": op.HeldMicros, "captured_micros": op.CapturedMicros, "released_micros": op.ReleasedMicros,
			"approval_expires_at": op.ApprovalExpiresAt, "model": op.Scope.Model, "size": op.Scope.Size,
		}}}
	if op.Denial != nil {
		a.Details["denial"] = op.Denial.Message
	}
	return a
}

func (r *Router) capabilities(ctx context.Context, c toolCall) answer {
	var none map[string]json.RawMessage
	if err := json.Unmarshal(c.args, &none); err != nil || len(none) > 0 {
		return refusal(CodeInvalidArguments, "capabilities takes no arguments")
	}
	resp, err := r.cfg.Hubu.GetCapabilitiesWithResponse(ctx)
	if err != nil {
		return r.unavailable("")
	}
	if resp.JSON200 == nil {
		return r.hubuRefusal(ctx, resp.StatusCode(), resp.Body, "")
	}
	caps := resp.JSON200
	sources := make([]string, 0, len(identity.Sources))
	for _, s := range identity.Sources {
		sources = append(sources, s.Key)
	}
	models := make([]map[string]any, 0, len(caps.Prices))
	for _, p := range caps.Prices {
		models = append(models, map[string]any{"provider": p.Provider, "model": p.Model, "size": p.Size, "amount_micros": p.AmountMicros, "currency": p.Currency})
	}
	return answer{ToolResult: ToolResult{Status: "ok", Message: fmt.Sprintf("%d models; %d of %d micros left this %s; spends above %d micros need approval",
		len(models), caps.Budget.RemainingMicros, caps.Budget.LimitMicros, caps.Budget.Period, caps.AutoApproveLimitMicros),
		Details: map[string]any{
			"tools":                        []string{ToolGenerateImage, ToolEditImage, ToolResumeOperation, ToolOperationStatus, ToolCapabilities, ToolGetExecution},
			"models":                       models,
			"budget":                       caps.Budget,
			"auto_approve_limit_micros":    caps.AutoApproveLimitMicros,
			"per_operation_ceiling_micros": caps.PerOperationCeilingMicros,
			"identity_sources":             sources,
		}}}
}

func (r *Router) getExecution(ctx context.Context, handle string) answer {
	// Without embed_image: the router may hold the image already (see keptImage), and a look
	// at an execution is no spend on its way, whose time counts.
	resp, err := r.cfg.Gongbu.GetOperationExecutionWithResponse(ctx, handle, nil)
	switch {
	case err != nil:
		return refusal(CodeBackendUnavailable, "Gongbu cannot be reached; try again")
	case resp.StatusCode() == http.StatusNotFound:
		return refusal(CodeNotFound, "no execution for that operation (yet)")
	case resp.JSON200 == nil:
		return refusal(CodeBackendUnavailable, "Gongbu answered %d", resp.StatusCode())
	}
	e := resp.JSON200
	amount := e.AmountMicros
	a := answer{ToolResult: ToolResult{Status: string(e.State), PublicHandle: handle, AmountMicros: &amount, Currency: e.Currency,
		ChargedMicros: e.ChargedMicros, Message: "execution " + string(e.State)}}
	switch {
	case e.Result != nil:
		a.Result, a.image, _ = r.result(ctx, handle, e.Result)
	case e.State == gongbuapi.Succeeded && e.ResolvedAt != nil:
		a.Message = "execution succeeded; " + resolvedCharged(e.ChargedMicros)
	case e.State == gongbuapi.Failed:
		a.Message = "execution failed; " + executionFailed(e.ChargedMicros)
	}
	return a
}
