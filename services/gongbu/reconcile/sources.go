package reconcile

import (
	"context"
	"fmt"
	"net/http"

	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/proto/hubuapi"
)

// HTTPRecords reads Hubu's decisions and Gongbu's executions over the services' generated
// clients.
type HTTPRecords struct {
	hubu   *hubuapi.ClientWithResponses
	gongbu *gongbuapi.ClientWithResponses
}

// NewRecords returns the records of a stack: Hubu's with a service token, Gongbu's with the
// token it accepts from Hubu.
func NewRecords(hubuURL, hubuToken, gongbuURL, gongbuToken string, hc *http.Client) (*HTTPRecords, error) {
	h, err := hubuapi.NewClientWithResponses(hubuURL, hubuapi.WithHTTPClient(hc), hubuapi.WithRequestEditorFn(bearer(hubuToken)))
	if err != nil {
		return nil, err
	}
	g, err := gongbuapi.NewClientWithResponses(gongbuURL, gongbuapi.WithHTTPClient(hc), gongbuapi.WithRequestEditorFn(bearer(gongbuToken)))
	if err != nil {
		return nil, err
	}
	return &HTTPRecords{hubu: h, gongbu: g}, nil
}

func bearer(token string) func(context.Context, *http.Request) error {
	return func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
}

// Decisions reads Hubu's decisions.
func (s *HTTPRecords) Decisions(ctx context.Context) ([]Decision, error) {
	resp, err := s.hubu.ListDecisionsWithResponse(ctx)
	if err != nil {
		return nil, err
	}
	if resp.JSON200 == nil {
		return nil, fmt.Errorf("status %d", resp.StatusCode())
	}
	out := make([]Decision, 0, len(resp.JSON200.Decisions))
	for _, d := range resp.JSON200.Decisions {
		out = append(out, Decision{
			ID: d.DecisionId, PublicHandle: d.PublicHandle, State: string(d.State), Currency: d.Currency,
			AmountMicros: d.AmountMicros, HeldMicros: d.HeldMicros, CapturedMicros: d.CapturedMicros,
			ProviderCostMicros: d.ProviderCostMicros, CreatedAt: d.CreatedAt,
		})
	}
	return out, nil
}

// Executions reads Gongbu's executions.
func (s *HTTPRecords) Executions(ctx context.Context) ([]Execution, error) {
	resp, err := s.gongbu.ListExecutionsWithResponse(ctx)
	if err != nil {
		return nil, err
	}
	if resp.JSON200 == nil {
		return nil, fmt.Errorf("status %d", resp.StatusCode())
	}
	out := make([]Execution, 0, len(resp.JSON200.Executions))
	for _, e := range resp.JSON200.Executions {
		out = append(out, Execution{
			DecisionID: e.DecisionId, Provider: e.Scope.Provider, State: string(e.State),
			JobID: deref(e.ProviderJobId), PollingURL: deref(e.PollingUrl), AmountMicros: e.AmountMicros,
			ChargedMicros: deref(e.ChargedMicros), ProviderCostMicros: e.ProviderCostMicros,
			Reported: deref(e.Reported), UpdatedAt: e.UpdatedAt,
		})
	}
	return out, nil
}

// MockLedger reads mockflux's charge ledger (GET /_mock/charges), which the real API does not
// have.
type MockLedger struct{ flux *bflapi.ClientWithResponses }

// NewMockLedger returns the ledger of the mockflux at baseURL.
func NewMockLedger(baseURL string, hc *http.Client) (*MockLedger, error) {
	f, err := bflapi.NewClientWithResponses(baseURL, bflapi.WithHTTPClient(hc))
	if err != nil {
		return nil, err
	}
	return &MockLedger{flux: f}, nil
}

// Charges reads the ledger; a refunded charge is none.
func (l *MockLedger) Charges(ctx context.Context) ([]Charge, error) {
	resp, err := l.flux.ListChargesWithResponse(ctx)
	if err != nil {
		return nil, err
	}
	if resp.JSON200 == nil {
		return nil, fmt.Errorf("status %d", resp.StatusCode())
	}
	out := make([]Charge, 0, len(resp.JSON200.Charges))
	for _, c := range resp.JSON200.Charges {
		if deref(c.Refunded) {
			continue // the task ended without a result: the provider gave the charge back
		}
		out = append(out, Charge{ID: c.Id, JobID: c.JobId, AmountMicros: c.AmountMicros, IdempotencyKey: deref(c.IdempotencyKey)})
	}
	return out, nil
}

// deref is *p, or the zero value for an absent optional field.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
