package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/services/mockflux"
)

// `gongbu reconcile`, the real command, against the services wired in this process. In its
// production form it looks each job up at the provider with the key: agreement exits 0, and a
// provider it cannot ask fails it. With mockflux's ledger, a charge no execution explains
// exits non-zero and is named.
func TestReconcileCommand(t *testing.T) {
	t.Parallel()
	s := newInProcess(t, inProcessOptions{fluxIdempotent: true})
	op := s.spend("flux-dev")
	s.settle(op.PublicHandle)
	out, err := s.reconcileCommand("test-key")
	if err != nil || !strings.Contains(out, "provider jobs looked up 1;") || !strings.Contains(out, "the provider's balance is") ||
		!strings.HasSuffix(out, "in agreement\n") {
		t.Fatalf("agreeing records: %v\n%s", err, out)
	}
	if out, err := s.reconcileCommand("wrong-key"); err == nil || !strings.Contains(out, "could not ask the provider about job") ||
		!strings.Contains(out, "balance could not be read (read the FLUX credits: status 403)") {
		t.Fatalf("a provider that refuses the key: %v\n%s", err, out)
	}
	if out, err := s.reconcileCommand("test-key", "--mock-ledger", s.fluxURL); err != nil || !strings.Contains(out, "provider charges 1;") {
		t.Fatalf("agreeing records and ledger: %v\n%s", err, out)
	}
	s.submitAtProvider("flux-dev", "stray", 1024, nil) // a charge for nobody Hubu or Gongbu knows of
	out, err = s.reconcileCommand("test-key", "--mock-ledger", s.fluxURL)
	if err == nil || !strings.Contains(out, "MISMATCH") || !strings.Contains(out, "belongs to no Gongbu execution") {
		t.Fatalf("stray charge: %v\n%s", err, out)
	}
	if strings.Contains(out, s.hubu.ServiceToken) || strings.Contains(out, s.gongbuToken) || strings.Contains(out, "test-key") {
		t.Fatal("reconcile printed a token or the provider's key")
	}
}

// The production form fails on what the provider says of a job: Gongbu's record of a spend
// says it failed without a charge, and the provider finished its job (and charges for it).
func TestReconcileAsksTheProvider(t *testing.T) {
	t.Parallel()
	s := newInProcess(t, inProcessOptions{})
	op := s.spend("flux-dev") // submitted: Hubu executing, the job at mockflux
	// Gongbu's record is made to say the job failed uncharged, not yet reported to Hubu.
	must(s.gongbuPool.Exec(context.Background(),
		"UPDATE executions SET state = 'failed', charged_micros = 0 WHERE public_handle = $1", op.PublicHandle))(t)
	var out string
	noError(t, poll(10*time.Second, 50*time.Millisecond, func() (err error) {
		out, err = s.reconcileCommand("test-key") // each look is a poll: mockflux's job turns Ready
		if err == nil || !strings.Contains(out, "Gongbu failed it without a charge, but the provider finished job") {
			return fmt.Errorf("not yet named: %v", err)
		}
		return nil
	}))
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
