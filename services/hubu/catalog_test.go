package hubu_test

import (
	"testing"

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
