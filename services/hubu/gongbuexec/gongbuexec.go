// Package gongbuexec is Hubu's executor backed by Gongbu, through Gongbu's generated client:
// it hands a decision to Gongbu, which runs it at most once per decision id.
package gongbuexec

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"hubu.dev/hubu/kit/httpjson"
	"hubu.dev/hubu/kit/tracing"
	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/proto/decisionsig"
	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/services/hubu"
)

// Executor implements hubu.Executor.
type Executor struct {
	api *gongbuapi.ClientWithResponses
	// images reads kept images, which are larger than any other answer of Gongbu's.
	images *gongbuapi.Client
	// Signer, when set, signs each decision handed off, so that Gongbu checks it without
	// asking Hubu; without one, Gongbu asks.
	Signer *Signer
}

// SignatureTTL is how long a decision's signature lets Gongbu take it without asking Hubu:
// long enough for the hand-off it travels with (Hubu's client gives up after 30 s), short
// enough that a signature kept from one hand-off says little about the operation later.
const SignatureTTL = time.Minute

// Signer signs decisions for Gongbu (see decisionsig).
type Signer struct {
	Key ed25519.PrivateKey
	Now func() time.Time // nil: time.Now
}

// sign returns the signature of d, stating its operation's state as Hubu read it for the
// hand-off (dispatching: lifecycle's handOff hands off nothing else), or "" when d is too large
// to sign in a header.
func (s *Signer) sign(d hubu.Decision) (string, error) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	sig, err := decisionsig.Sign(s.Key, decisionsig.Claims{
		DecisionID: d.DecisionID, PublicHandle: d.PublicHandle, AgentID: d.AgentID, Tool: d.Tool,
		Scope:     decisionsig.Scope{Provider: d.Scope.Provider, Model: d.Scope.Model, Size: d.Scope.Size},
		Arguments: d.Arguments, AmountMicros: d.AmountMicros, Currency: d.Currency,
		State: string(d.State), IssuedAt: d.IssuedAt,
		Audience: decisionsig.Audience, ExpiresAt: now().Add(SignatureTTL),
	})
	if err != nil || len(sig) > decisionsig.MaxHeader {
		return "", err
	}
	return sig, nil
}

var (
	_ hubu.Executor = (*Executor)(nil)
	_ hubu.Images   = (*Executor)(nil)
)

// maxImage bounds an image read from Gongbu: the largest it keeps.
const maxImage = 32 << 20

// New returns an executor for the Gongbu at baseURL; serviceToken is the credential Gongbu
// accepts from Hubu. It reads Gongbu's answers through a copy of hc that refuses any longer
// than httpjson.MaxResponse: the generated client reads whole bodies.
func New(baseURL, serviceToken string, hc *http.Client) (*Executor, error) {
	auth := gongbuapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+serviceToken)
		return nil
	})
	api, err := gongbuapi.NewClientWithResponses(baseURL, gongbuapi.WithHTTPClient(httpjson.WithResponseLimit(hc, httpjson.MaxResponse)), auth)
	if err != nil {
		return nil, err
	}
	images, err := gongbuapi.NewClient(baseURL, gongbuapi.WithHTTPClient(hc), auth)
	if err != nil {
		return nil, err
	}
	return &Executor{api: api, images: images}, nil
}

// ImageSize reads the sides of the image Gongbu keeps for a decision's execution.
func (e *Executor) ImageSize(ctx context.Context, decisionID uuid.UUID) (contract.Dimensions, error) {
	resp, err := e.api.GetExecutionWithResponse(ctx, decisionID)
	switch {
	case err != nil:
		return contract.Dimensions{}, hubu.Errorf(hubu.CodeUnavailable, "the executor cannot be reached")
	case resp.StatusCode() == http.StatusNotFound:
		return contract.Dimensions{}, hubu.Errorf(hubu.CodeNotFound, "the executor has no execution of that decision")
	case resp.JSON200 == nil:
		return contract.Dimensions{}, hubu.Errorf(hubu.CodeUnavailable, "the executor answered %d", resp.StatusCode())
	}
	r := resp.JSON200.Result
	if r == nil || r.Image == nil || r.Image.Width == nil || r.Image.Height == nil {
		return contract.Dimensions{}, hubu.Errorf(hubu.CodeNotFound, "the executor keeps no image of known size for that decision")
	}
	return contract.Dimensions{Width: *r.Image.Width, Height: *r.Image.Height}, nil
}

// Image reads the image Gongbu keeps for the operation of handle, or its preview, with Hubu's
// service credential (Gongbu serves any operation's image to it).
func (e *Executor) Image(ctx context.Context, handle string, preview bool) (hubu.KeptImage, error) {
	var params *gongbuapi.GetOperationImageParams
	if preview {
		params = &gongbuapi.GetOperationImageParams{Preview: &preview}
	}
	resp, err := e.images.GetOperationImage(ctx, handle, params)
	if err != nil {
		return hubu.KeptImage{}, hubu.Errorf(hubu.CodeUnavailable, "the executor cannot be reached")
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return hubu.KeptImage{}, hubu.Errorf(hubu.CodeNotFound, "the executor keeps no image for that operation")
	default:
		return hubu.KeptImage{}, hubu.Errorf(hubu.CodeUnavailable, "the executor answered %d", resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxImage+1))
	if err != nil || len(b) > maxImage {
		return hubu.KeptImage{}, hubu.Errorf(hubu.CodeUnavailable, "the image could not be read from the executor")
	}
	mimeType := resp.Header.Get("Content-Type")
	if err := contract.CheckImage(mimeType, b); err != nil {
		return hubu.KeptImage{}, fmt.Errorf("the executor served what is not a kept image: %w", err)
	}
	return hubu.KeptImage{MIMEType: mimeType, Bytes: b, ETag: resp.Header.Get("ETag")}, nil
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
	var params gongbuapi.ExecuteParams
	if e.Signer != nil {
		sig, err := e.Signer.sign(d)
		if err != nil {
			return fmt.Errorf("sign the decision: %w", err)
		}
		if sig != "" {
			params.HubuDecisionSignature = &sig
		}
	}
	resp, err := e.api.ExecuteWithResponse(ctx, &params, gongbuapi.ExecutionRequest{
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
