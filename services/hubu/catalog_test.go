package hubu_test

import (
	"strings"
	"testing"

	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/services/hubu"
)

func TestCatalogPriceOf(t *testing.T) {
	t.Parallel()
	catalog := hubu.Catalog{
		{Provider: "bfl", Model: "flux-dev", Size: "*", AmountMicros: 25_000, Currency: "USD"},
		{Provider: "bfl", Model: "flux-dev", Size: "512x512", AmountMicros: 10_000, Currency: "USD"},
		{Provider: "bfl", Model: "flux-pro", Size: "1024x1024", AmountMicros: 40_000, Currency: "USD"},
		{Provider: "other", Model: "flux-schnell", Size: "*", AmountMicros: 1, Currency: "USD"},
	}
	for _, c := range []struct {
		scope hubu.Scope
		want  int64
		err   string
	}{
		{hubu.Scope{Provider: "bfl", Model: "flux-dev", Size: "512x512"}, 10_000, ""}, // the exact size wins over "*"
		{hubu.Scope{Provider: "bfl", Model: "flux-dev", Size: "1024x1024"}, 25_000, ""},
		{hubu.Scope{Provider: "bfl", Model: "flux-pro", Size: "1024x1024"}, 40_000, ""},
		{hubu.Scope{Provider: "bfl", Model: "flux-pro", Size: "512x512"}, 0, `invalid_arguments: model "flux-pro" has no price for size 512x512`},
		{hubu.Scope{Provider: "bfl", Model: "flux-schnell", Size: "512x512"}, 0, `invalid_arguments: unknown model "flux-schnell"`}, // another provider's
	} {
		p, err := catalog.PriceOf(c.scope)
		switch {
		case c.err != "" && (err == nil || err.Error() != c.err):
			t.Errorf("%+v: %v, want %s", c.scope, err, c.err)
		case c.err == "" && (err != nil || p.AmountMicros != c.want):
			t.Errorf("%+v: %d %v, want %d", c.scope, p.AmountMicros, err, c.want)
		}
	}
}

// A per-megapixel price is BFL's FLUX.2 arithmetic: the first megapixel of output, each further
// one, and each megapixel of the input images, every count of 2^20 pixels rounded up (the
// inputs' together, each input at most 4 MP as BFL shrinks it).
func TestPriceAmountFor(t *testing.T) {
	t.Parallel()
	pro := hubu.Price{Model: "flux-2-pro", Rule: hubu.PriceMegapixel, AmountMicros: 30_000, ExtraMPMicros: 15_000, InputMPMicros: 15_000, Currency: "USD"}
	flat := hubu.Price{Model: "flux-pro-1.1", Rule: hubu.PriceFlat, AmountMicros: 40_000, Currency: "USD"}
	dims := func(w, h int) contract.Dimensions { return contract.Dimensions{Width: w, Height: h} }
	for _, c := range []struct {
		name   string
		price  hubu.Price
		size   string
		inputs []contract.Dimensions
		want   int64
		err    string
	}{
		{"1 MP exactly", pro, "1024x1024", nil, 30_000, ""},
		{"a sliver over 1 MP", pro, "1024x1040", nil, 45_000, ""},
		{"1920x1080 is 1.98 MP: 2", pro, "1920x1080", nil, 45_000, ""}, // BFL answered cost 4.5 credits for output_mp 1.98
		{"4 MP", pro, "2048x2048", nil, 75_000, ""},
		{"tiny", pro, "64x64", nil, 30_000, ""},
		{"one 1 MP input", pro, "1024x1024", []contract.Dimensions{dims(1024, 1024)}, 45_000, ""},
		{"inputs summed, then rounded", pro, "1024x1024", []contract.Dimensions{dims(512, 512), dims(512, 512), dims(512, 512)}, 45_000, ""},
		{"an input over 4 MP counts 4", pro, "1024x1024", []contract.Dimensions{dims(4096, 4096)}, 90_000, ""},
		{"a flat price", flat, "1440x1440", []contract.Dimensions{dims(1024, 1024)}, 40_000, ""},
		{"an aspect ratio priced per megapixel", pro, "16:9", nil, 0, "not in pixels"},
	} {
		got, err := c.price.AmountFor(c.size, c.inputs)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %d %v, want an error saying %q", c.name, got, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s: %d %v, want %d", c.name, got, err, c.want)
		}
	}
	if got := pro.Describe(); got != "USD 0.03 for the first megapixel, USD 0.015 for each further megapixel, USD 0.015 for each megapixel of input images" {
		t.Errorf("describe: %q", got)
	}
}
