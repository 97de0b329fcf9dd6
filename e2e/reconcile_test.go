package e2e_test

import (
	"context"
	"strings"
	"testing"

	"hubu.dev/hubu/services/mockflux"
)

// `gongbu reconcile`, the real command, against the services wired in this process: silent
// agreement exits 0; a charge no execution explains exits non-zero and names it.
func TestReconcileCommand(t *testing.T) {
	t.Parallel()
	s := newInProcess(t, inProcessOptions{fluxIdempotent: true})
	op := s.spend("flux-dev")
	s.settle(op.PublicHandle)
	if out, err := s.reconcileCommand(); err != nil || !strings.Contains(out, "in agreement") {
		t.Fatalf("agreeing records: %v\n%s", err, out)
	}
	s.submitAtProvider("flux-dev", "stray", 1024, nil) // a charge for nobody Hubu or Gongbu knows of
	out, err := s.reconcileCommand()
	if err == nil || !strings.Contains(out, "MISMATCH") || !strings.Contains(out, "belongs to no Gongbu execution") {
		t.Fatalf("stray charge: %v\n%s", err, out)
	}
	if strings.Contains(out, s.hubu.ServiceToken) || strings.Contains(out, s.gongbuToken) {
		t.Fatal("reconcile printed a token")
	}
}

// mockflux charges what Hubu's default catalog prices, so captures can equal charges.
func TestMockfluxPricesMatchHubusCatalog(t *testing.T) {
	t.Parallel()
	s := newInProcess(t, inProcessOptions{fluxIdempotent: true})
	prices, err := s.hubu.Operator.ListPricesWithResponse(context.Background())
	if err != nil || prices.JSON200 == nil {
		t.Fatal(err)
	}
	seen := 0
	for _, p := range prices.JSON200.Prices {
		m, ok := mockflux.Models[p.Model]
		if !ok || p.Provider != "bfl" || p.Size != "*" {
			t.Errorf("catalog entry %+v has no mockflux model", p)
			continue
		}
		var extra, input int64
		if p.ExtraMpMicros != nil && p.InputMpMicros != nil {
			extra, input = *p.ExtraMpMicros, *p.InputMpMicros
		}
		if got := (mockflux.Price{FirstMPMicros: p.AmountMicros, ExtraMPMicros: extra, InputMPMicros: input}); got != m.Price || p.Currency != "USD" {
			t.Errorf("%s: Hubu prices %+v %s, mockflux charges %+v USD", p.Model, got, p.Currency, m.Price)
		}
		seen++
	}
	if seen != len(mockflux.Models) {
		t.Errorf("mockflux has %d models, Hubu's catalog %d", len(mockflux.Models), seen)
	}
}
