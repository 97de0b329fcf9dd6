package httpserver

import (
	"testing"

	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/proto/hubuspec"
)

// The server validates formats with its own regular expressions; they must be the ones the
// spec publishes, or clients would be told one thing and held to another.
func TestSpecPatterns(t *testing.T) {
	doc, err := hubuspec.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	schema := func(name string) map[string]string {
		s := doc.Components.Schemas[name]
		if s == nil || s.Value == nil {
			t.Fatalf("no schema %s", name)
		}
		out := map[string]string{"": s.Value.Pattern}
		for prop, ref := range s.Value.Properties {
			out[prop] = ref.Value.Pattern
		}
		return out
	}
	for _, c := range []struct {
		schema, prop, got string
	}{
		{"OperationKey", "", contract.OperationKeyPattern},
		{"PublicHandle", "", contract.PublicHandlePattern},
		{"AuthorizeRequest", "request_hash", requestHashRE.String()},
		{"PriceUpdate", "provider", providerRE.String()},
		{"PriceUpdate", "model", contract.ModelPattern},
		{"PriceUpdate", "size", sizeRE.String()},
		{"PriceUpdate", "currency", currencyRE.String()},
		{"Policy", "currency", currencyRE.String()},
		{"AgentCreate", "name", agentNameRE.String()},
		{"AgentCreate", "account", accountRE.String()},
		{"AccountUpdate", "account", accountRE.String()},
	} {
		if want := schema(c.schema)[c.prop]; want != c.got {
			t.Errorf("%s.%s: spec pattern %q, server pattern %q", c.schema, c.prop, want, c.got)
		}
	}
}
