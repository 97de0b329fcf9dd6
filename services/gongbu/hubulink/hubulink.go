// Package hubulink is Gongbu's side of the wire to Hubu, through Hubu's generated client:
// it fetches the decisions Hubu issued, reports outcomes, and asks whether an operation
// belongs to the agent presenting a token.
package hubulink

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/google/uuid"

	"hubu.dev/hubu/kit/httpjson"
	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/proto/decisionsig"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/gongbu"
)

// Client implements gongbu.Authority.
type Client struct {
	api *hubuapi.ClientWithResponses
}

var _ gongbu.Authority = (*Client)(nil)

// New returns a client for the Hubu at baseURL, authenticating with a Hubu service token.
// It reads Hubu's answers through a copy of hc that refuses any longer than
// httpjson.MaxResponse: the generated client reads whole bodies.
func New(baseURL, serviceToken string, hc *http.Client) (*Client, error) {
	hc = httpjson.WithResponseLimit(hc, httpjson.MaxResponse)
	api, err := hubuapi.NewClientWithResponses(baseURL, hubuapi.WithHTTPClient(hc), hubuapi.WithRequestEditorFn(bearer(serviceToken)))
	if err != nil {
		return nil, err
	}
	return &Client{api: api}, nil
}

func bearer(token string) hubuapi.RequestEditorFn {
	return func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
}

// Decision returns the decision Hubu issued under id, with its operation's state and its
// count of hand-offs.
func (c *Client) Decision(ctx context.Context, id uuid.UUID) (gongbu.Issued, error) {
	resp, err := c.api.GetDecisionWithResponse(ctx, id)
	if err != nil {
		return gongbu.Issued{}, fmt.Errorf("get decision from Hubu: %w", err)
	}
	switch {
	case resp.JSON200 != nil:
	case resp.StatusCode() == http.StatusNotFound:
		return gongbu.Issued{}, gongbu.Errorf(gongbu.CodeNotFound, "Hubu has no decision %s", id)
	default:
		return gongbu.Issued{}, fmt.Errorf("get decision from Hubu: status %d", resp.StatusCode())
	}
	d := resp.JSON200
	var args gongbu.ImageArguments
	raw, err := json.Marshal(d.Arguments)
	if err == nil {
		err = json.Unmarshal(raw, &args)
	}
	if err != nil {
		return gongbu.Issued{}, fmt.Errorf("decode decision arguments: %w", err)
	}
	return gongbu.Issued{
		Decision: gongbu.Decision{
			DecisionID: d.DecisionId, PublicHandle: d.PublicHandle, AgentID: d.AgentId, Tool: string(d.Tool),
			Scope:     gongbu.Scope{Provider: d.Scope.Provider, Model: d.Scope.Model, Size: d.Scope.Size},
			Arguments: args, AmountMicros: d.AmountMicros, Currency: d.Currency,
		},
		State: string(d.State), IssuedAt: d.IssuedAt,
	}, nil
}

// DecisionKeys returns the public keys Hubu signs decisions with.
func (c *Client) DecisionKeys(ctx context.Context) ([]decisionsig.Key, error) {
	resp, err := c.api.ListDecisionKeysWithResponse(ctx)
	if err != nil {
		return nil, fmt.Errorf("get decision keys from Hubu: %w", err)
	}
	if resp.JSON200 == nil {
		return nil, fmt.Errorf("get decision keys from Hubu: status %d", resp.StatusCode())
	}
	keys := make([]decisionsig.Key, 0, len(resp.JSON200.Keys))
	for _, k := range resp.JSON200.Keys {
		pub, err := base64.RawURLEncoding.DecodeString(k.PublicKey)
		if err != nil || len(pub) != ed25519.PublicKeySize || decisionsig.KeyID(pub) != k.Kid {
			return nil, fmt.Errorf("get decision keys from Hubu: key %q is not an Ed25519 key of that id", k.Kid)
		}
		keys = append(keys, decisionsig.Key{ID: k.Kid, Public: pub})
	}
	return keys, nil
}

// Settle captures amount of the decision's hold; with failed, the operation fails with reason.
// providerCost, where the provider stated one, is recorded beside the capture.
func (c *Client) Settle(ctx context.Context, id uuid.UUID, amount int64, failed bool, reason string, providerCost *int64) error {
	body := hubuapi.SettleRequest{AmountMicros: amount, ProviderCostMicros: providerCost}
	if failed {
		body.Failed = &failed
		if reason = truncate(reason); reason != "" {
			body.Reason = &reason
		}
	}
	resp, err := c.api.SettleDecisionWithResponse(ctx, id, body)
	if err != nil {
		return fmt.Errorf("settle with Hubu: %w", err)
	}
	if resp.JSON200 == nil {
		return fmt.Errorf("settle with Hubu: status %d: %s", resp.StatusCode(), problemCode(resp.Body))
	}
	return nil
}

// Release releases the decision's whole hold.
func (c *Client) Release(ctx context.Context, id uuid.UUID, reason string) error {
	body := hubuapi.ReleaseRequest{}
	if reason = truncate(reason); reason != "" {
		body.Reason = &reason
	}
	resp, err := c.api.ReleaseDecisionWithResponse(ctx, id, body)
	if err != nil {
		return fmt.Errorf("release with Hubu: %w", err)
	}
	if resp.JSON200 == nil {
		return fmt.Errorf("release with Hubu: status %d: %s", resp.StatusCode(), problemCode(resp.Body))
	}
	return nil
}

// Owns asks Hubu, with the caller's own credential, for the operation: Hubu answers 404 for
// an operation that is not the agent's, so ownership never depends on Gongbu's own records.
func (c *Client) Owns(ctx context.Context, caller gongbu.Caller, publicHandle string) (bool, error) {
	resp, err := c.api.GetOperationWithResponse(ctx, publicHandle, bearer(caller.Token), func(_ context.Context, r *http.Request) error {
		if caller.Grant != "" {
			r.Header.Set(contract.GrantHeader, caller.Grant)
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("ask Hubu about the operation: %w", err)
	}
	switch resp.StatusCode() {
	case http.StatusOK:
		return true, nil
	case http.StatusNotFound, http.StatusForbidden, http.StatusBadRequest:
		return false, nil
	case http.StatusUnauthorized:
		return false, gongbu.Errorf(gongbu.CodeUnauthorized, "the bearer token is not valid")
	}
	return false, fmt.Errorf("ask Hubu about the operation: status %d", resp.StatusCode())
}

func problemCode(body []byte) string {
	var p hubuapi.Problem
	if json.Unmarshal(body, &p) != nil {
		return "no problem body"
	}
	return string(p.Code)
}

// truncate cuts a reason to the 500 characters Hubu takes; cutting bytes could split a character.
func truncate(reason string) string {
	if r := []rune(reason); len(r) > 500 {
		return string(r[:500])
	}
	return reason
}
