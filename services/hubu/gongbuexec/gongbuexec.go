// Package gongbuexec is Hubu's executor backed by Gongbu, through Gongbu's generated client:
// it hands a decision to Gongbu, which runs it at most once per decision id.
package gongbuexec

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"hubu.dev/hubu/kit/httpjson"
	"hubu.dev/hubu/kit/tracing"
	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/services/hubu"
)

// Executor implements hubu.Executor.
type Executor struct {
	api *gongbuapi.ClientWithResponses
}

var _ hubu.Executor = (*Executor)(nil)

// New returns an executor for the Gongbu at baseURL; serviceToken is the credential Gongbu
// accepts from Hubu. It reads Gongbu's answers through a copy of hc that refuses any longer
// than httpjson.MaxResponse: the generated client reads whole bodies.
func New(baseURL, serviceToken string, hc *http.Client) (*Executor, error) {
	hc = httpjson.WithResponseLimit(hc, httpjson.MaxResponse)
	api, err := gongbuapi.NewClientWithResponses(baseURL, gongbuapi.WithHTTPClient(hc),
		gongbuapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+serviceToken)
			return nil
		}))
	if err != nil {
		return nil, err
	}
	return &Executor{api: api}, nil
}

// Execute hands the decision to Gongbu. Gongbu answers 202 for a new execution and 200 for
// one it has; both mean it holds the decision durably.
//
// The hand-off is a span of its own, hubu.hand_off, with the operation's public handle and
// the decision id: in the trace of the authorization (or resume) that decided it, or, sent
// again by a recovery pass, in a trace of its own.
func (e *Executor) Execute(ctx context.Context, d hubu.Decision) (err error) {
	ctx, span := tracing.Start(ctx, "hubu.dev/hubu/services/hubu/gongbuexec", "hubu.hand_off", trace.WithAttributes(
		attribute.String("hubu.public_handle", d.PublicHandle), attribute.String("hubu.decision_id", d.DecisionID.String())))
	defer func() {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	var args gongbuapi.ImageArguments
	if err := json.Unmarshal(d.Arguments, &args); err != nil {
		return fmt.Errorf("decode decision arguments: %w", err)
	}
	resp, err := e.api.ExecuteWithResponse(ctx, gongbuapi.ExecutionRequest{
		DecisionId: d.DecisionID, PublicHandle: d.PublicHandle, AgentId: d.AgentID, Tool: gongbuapi.ExecutionRequestTool(d.Tool),
		Scope:     gongbuapi.Scope{Provider: d.Scope.Provider, Model: d.Scope.Model, Size: d.Scope.Size},
		Arguments: args, AmountMicros: d.AmountMicros, Currency: d.Currency,
	})
	if err != nil {
		return fmt.Errorf("hand the decision to Gongbu: %w", err)
	}
	if resp.JSON200 == nil && resp.JSON202 == nil {
		var p gongbuapi.Problem
		_ = json.Unmarshal(resp.Body, &p)
		return fmt.Errorf("decision refused by Gongbu: status %d, code %s", resp.StatusCode(), p.Code)
	}
	return nil
}
