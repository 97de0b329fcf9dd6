package httpserver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"hubu.dev/hubu/proto/hubuapi"
)

// A new operation is held at what BFL charges for the size it makes: per megapixel for FLUX.2
// (the model's default size when it names none), flat for the others, whatever their aspect
// ratio.
func TestHoldIsWhatBFLCharges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.NewAgent(t, "agent", policy(1_000_000, 1_000_000, 10_000_000))
	for _, c := range []struct {
		model         string
		width, height int
		aspect        string
		size          string
		want          int64
	}{
		{"flux-2-pro", 0, 0, "", "1024x1024", 30_000},
		{"flux-2-pro", 1920, 1072, "", "1920x1072", 45_000},
		{"flux-2-pro", 2048, 2048, "", "2048x2048", 75_000},
		{"flux-2-max", 1440, 1440, "", "1440x1440", 70_000 + 30_000},
		{"flux-2-flex", 1024, 1024, "", "1024x1024", 60_000},
		{"flux-2-klein-4b", 2048, 1024, "", "2048x1024", 14_000 + 1_000},
		{"flux-2-klein-9b", 0, 0, "", "1024x1024", 15_000},
		{"flux-pro-1.1", 1440, 1440, "", "1440x1440", 40_000},
		{"flux-pro-1.1", 0, 0, "", "1024x768", 40_000},
		{"flux-pro-1.1-ultra", 0, 0, "21:9", "21:9", 60_000},
		{"flux-pro-1.1-ultra", 0, 0, "", "16:9", 60_000},
		{"flux-kontext-pro", 0, 0, "", "1:1", 40_000},
		{"flux-kontext-max", 0, 0, "4:3", "4:3", 80_000},
	} {
		call := newCall(c.model)
		call.Args.Width, call.Args.Height, call.Args.AspectRatio = c.width, c.height, c.aspect
		op := spend(t, a, call, hubuapi.OperationStateExecuting)
		if op.AmountMicros != c.want || op.Scope.Size != c.size || op.HeldMicros != c.want {
			t.Errorf("%s %dx%d %s: held %d for %s, want %d for %s", c.model, c.width, c.height, c.aspect, op.AmountMicros, op.Scope.Size, c.want, c.size)
		}
	}
}

// An operator sets a per-megapixel price as BFL's: it covers every size of a model sized in
// pixels, and a new operation is held at it at once; a bad one is refused with a clear reason
// and changes nothing.
func TestPerMegapixelPrices(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.NewAgent(t, "agent", policy(1_000_000, 1_000_000, 10_000_000))
	i64 := func(n int64) *int64 { return &n }
	mp := hubuapi.Megapixel
	flat := hubuapi.Flat
	for _, c := range []struct {
		name   string
		update hubuapi.PriceUpdate
		detail string
	}{
		{"without input rate", hubuapi.PriceUpdate{Provider: "bfl", Model: "flux-2-pro", Size: "*", Rule: &mp, AmountMicros: 1, ExtraMpMicros: i64(1), Currency: "USD"},
			"a per-megapixel price needs extra_mp_micros and input_mp_micros"},
		{"for one size", hubuapi.PriceUpdate{Provider: "bfl", Model: "flux-2-pro", Size: "1024x1024", Rule: &mp, AmountMicros: 1, ExtraMpMicros: i64(1), InputMpMicros: i64(1), Currency: "USD"},
			"a per-megapixel price covers every size: size must be *"},
		{"for a model sized by aspect ratio", hubuapi.PriceUpdate{Provider: "bfl", Model: "flux-kontext-pro", Size: "*", Rule: &mp, AmountMicros: 1, ExtraMpMicros: i64(1), InputMpMicros: i64(1), Currency: "USD"},
			"model flux-kontext-pro is sized by aspect ratio, so it cannot be priced per megapixel"},
		{"rates on a flat price", hubuapi.PriceUpdate{Provider: "bfl", Model: "flux-2-pro", Size: "*", Rule: &flat, AmountMicros: 1, ExtraMpMicros: i64(1), Currency: "USD"},
			"extra_mp_micros and input_mp_micros are a per-megapixel price's (rule megapixel)"},
		{"a negative rate", hubuapi.PriceUpdate{Provider: "bfl", Model: "flux-2-pro", Size: "*", Rule: &mp, AmountMicros: 1, ExtraMpMicros: i64(-1), InputMpMicros: i64(1), Currency: "USD"},
			"must not be negative"},
	} {
		r, err := b.Operator.SetPriceWithResponse(ctx, c.update)
		if err != nil || r.StatusCode() != http.StatusBadRequest || problemCode(t, r.Body) != "invalid_arguments" || !strings.Contains(string(r.Body), c.detail) {
			t.Errorf("%s: %v %d %s", c.name, err, r.StatusCode(), r.Body)
		}
	}
	r, err := b.Operator.SetPriceWithResponse(ctx, hubuapi.PriceUpdate{Provider: "bfl", Model: "flux-2-pro", Size: "*", Rule: &mp,
		AmountMicros: 20_000, ExtraMpMicros: i64(10_000), InputMpMicros: i64(5_000), Currency: "USD"})
	if err != nil || r.JSON200 == nil || r.JSON200.Rule != hubuapi.Megapixel || *r.JSON200.ExtraMpMicros != 10_000 || *r.JSON200.InputMpMicros != 5_000 {
		t.Fatalf("set a per-megapixel price: %v %s", err, r.Body)
	}
	call := newCall("flux-2-pro")
	call.Args.Width, call.Args.Height = 2048, 1536
	if op := spend(t, a, call, hubuapi.OperationStateExecuting); op.AmountMicros != 20_000+2*10_000 {
		t.Fatalf("held %d at the new price, want %d", op.AmountMicros, 20_000+2*10_000)
	}
	// Back to a flat price: the per-megapixel rates go with the rule.
	r, err = b.Operator.SetPriceWithResponse(ctx, hubuapi.PriceUpdate{Provider: "bfl", Model: "flux-2-pro", Size: "*", AmountMicros: 50_000, Currency: "USD"})
	if err != nil || r.JSON200 == nil || r.JSON200.Rule != hubuapi.Flat || r.JSON200.ExtraMpMicros != nil {
		t.Fatalf("set a flat price: %v %s", err, r.Body)
	}
	again := newCall("flux-2-pro")
	again.Args = call.Args
	if op := spend(t, a, again, hubuapi.OperationStateExecuting); op.AmountMicros != 50_000 {
		t.Fatalf("held %d at the flat price, want 50000", op.AmountMicros)
	}
}
