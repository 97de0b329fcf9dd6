package contract_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"hubu.dev/hubu/proto/contract"
)

func load(t *testing.T, name string) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile("../" + name + ".openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// patterns returns every pattern doc declares, by where it stands in the document.
func patterns(t *testing.T, doc *openapi3.T) map[string]string {
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				if s, ok := c.(string); ok && k == "pattern" {
					out[where] = s
				}
				walk(where+"/"+k, c)
			}
		case []any:
			for i, c := range v {
				walk(fmt.Sprintf("%s/%d", where, i), c)
			}
		}
	}
	walk("", tree)
	return out
}

// Wherever a spec states the handle or key format, it states the one the code enforces.
func TestSpecsStateTheKeyAndHandleFormats(t *testing.T) {
	for _, c := range []struct {
		spec          string
		handles, keys int // at least this many places state each format
	}{
		{"hubu", 1, 1},
		{"gongbu", 3, 0}, // the path parameter and both bodies' public_handle
		{"bfl", 0, 0},
	} {
		handles, keys := 0, 0
		for where, p := range patterns(t, load(t, c.spec)) {
			switch {
			case strings.Contains(p, "hubu:public-operation"):
				handles++
				if p != contract.PublicHandlePattern {
					t.Errorf("%s %s: pattern %q, contract %q", c.spec, where, p, contract.PublicHandlePattern)
				}
			case strings.Contains(p, "hubu:operation"):
				keys++
				if p != contract.OperationKeyPattern {
					t.Errorf("%s %s: pattern %q, contract %q", c.spec, where, p, contract.OperationKeyPattern)
				}
			}
		}
		if handles < c.handles || keys < c.keys {
			t.Errorf("%s states the handle format %d times and the key format %d times", c.spec, handles, keys)
		}
	}
}

// Each spec's generate_image arguments state the limits its service enforces, as the contract
// has them: Hubu's every one; Gongbu's all but a side's step and the model's pattern (Gongbu
// takes the arguments from Hubu's decision, which it checks with Hubu, not on its own); the
// FLUX API's the sides' and the formats.
func TestSpecsStateTheImageLimits(t *testing.T) {
	for _, c := range []struct {
		spec, schema          string
		complete, step, model bool
	}{
		{"hubu", "GenerateImageArguments", true, true, true},
		{"gongbu", "ImageArguments", true, false, false},
		{"bfl", "FluxRequest", false, true, false},
	} {
		t.Run(c.spec, func(t *testing.T) {
			ref := load(t, c.spec).Components.Schemas[c.schema]
			if ref == nil || ref.Value == nil {
				t.Fatalf("no schema %s", c.schema)
			}
			prop := func(name string) *openapi3.Schema {
				if p := ref.Value.Properties[name]; p != nil && p.Value != nil {
					return p.Value
				}
				t.Fatalf("%s has no property %s", c.schema, name)
				return nil
			}
			limit := func(what string, got *float64, want float64, required bool) {
				switch {
				case got == nil && required:
					t.Errorf("%s: not stated; the contract's is %v", what, want)
				case got != nil && *got != want:
					t.Errorf("%s: spec %v, contract %v", what, *got, want)
				}
			}
			length := func(n *uint64) *float64 {
				if n == nil {
					return nil
				}
				return new(float64(*n))
			}

			prompt := prop("prompt")
			if prompt.MinLength != 1 {
				t.Errorf("prompt minLength: spec %d, contract 1", prompt.MinLength)
			}
			limit("prompt maxLength", length(prompt.MaxLength), contract.PromptMaxChars, c.complete)
			for _, side := range []string{"width", "height"} {
				s := prop(side)
				limit(side+" minimum", s.Min, contract.SideMin, true)
				limit(side+" maximum", s.Max, contract.SideMax, true)
				limit(side+" multipleOf", s.MultipleOf, contract.SideStep, c.step)
			}
			seed := prop("seed")
			limit("seed minimum", seed.Min, 0, c.complete)
			limit("seed maximum", seed.Max, contract.SeedMax, c.complete)
			if got := prop("output_format").Enum; !slices.Equal(got, []any{contract.FormatPNG, contract.FormatJPEG}) {
				t.Errorf("output_format enum: spec %v, contract [png jpeg]", got)
			}

			model, ok := ref.Value.Properties["model"]
			if !ok {
				return
			}
			if p := model.Value.Pattern; (p != "" || c.model) && p != contract.ModelPattern {
				t.Errorf("model pattern: spec %q, contract %q", p, contract.ModelPattern)
			}
			if n := model.Value.MinLength; n > 0 && (!contract.ValidModel(strings.Repeat("a", int(n))) || contract.ValidModel(strings.Repeat("a", int(n)-1))) {
				t.Errorf("model minLength %d is not the contract's pattern's", n)
			}
			if n := model.Value.MaxLength; n != nil && (!contract.ValidModel(strings.Repeat("a", int(*n))) || contract.ValidModel(strings.Repeat("a", int(*n)+1))) {
				t.Errorf("model maxLength %d is not the contract's pattern's", *n)
			}
		})
	}
}

// contract.ImageRequest travels as JSON with exactly the fields Hubu's and Gongbu's specs name,
// the required ones always present.
func TestImageRequestIsTheSpecsArguments(t *testing.T) {
	keys := func(r contract.ImageRequest) []string {
		raw, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		return slices.Sorted(maps.Keys(m))
	}
	full := keys(contract.ImageRequest{Prompt: "p", Model: "m", Width: 256, Height: 256, Seed: new(int64(7)), OutputFormat: new(contract.FormatPNG)})
	bare := keys(contract.ImageRequest{})
	for spec, schema := range map[string]string{"hubu": "GenerateImageArguments", "gongbu": "ImageArguments"} {
		s := load(t, spec).Components.Schemas[schema].Value
		if want := slices.Sorted(maps.Keys(s.Properties)); !slices.Equal(full, want) {
			t.Errorf("%s.%s has properties %v; ImageRequest has %v", spec, schema, want, full)
		}
		if want := slices.Sorted(slices.Values(s.Required)); !slices.Equal(bare, want) {
			t.Errorf("%s.%s requires %v; ImageRequest always has %v", spec, schema, want, bare)
		}
	}
}

func TestKeysAndHandles(t *testing.T) {
	const id = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"
	for _, c := range []struct {
		s           string
		handle, key bool
	}{
		{contract.NewPublicHandle(), true, false},
		{contract.NewOperationKey("codex"), false, true},
		{contract.NewOperationKey("claude-code"), false, true},
		{"hubu:public-operation:v1:" + id, true, false},
		{"hubu:public-operation:v1:" + strings.ToUpper(id), false, false},
		{"hubu:public-operation:v1:" + id + "\n", false, false},
		{"hubu:public-operation:v1:not-a-uuid", false, false},
		{"hubu:public-operation:v2:" + id, false, false},
		{"hubu:operation:v1:codex:" + id, false, true},
		{"hubu:operation:v1:" + strings.Repeat("a", 32) + ":" + id, false, true},
		{"hubu:operation:v1:" + strings.Repeat("a", 33) + ":" + id, false, false},
		{"hubu:operation:v1::" + id, false, false},
		{"hubu:operation:v1:-codex:" + id, false, false},
		{"hubu:operation:v1:Codex:" + id, false, false},
		{"hubu:operation:v1:codex:" + id[1:], false, false},
		{"", false, false},
	} {
		if got := contract.IsPublicHandle(c.s); got != c.handle {
			t.Errorf("IsPublicHandle(%q) = %v", c.s, got)
		}
		if got := contract.IsOperationKey(c.s); got != c.key {
			t.Errorf("IsOperationKey(%q) = %v", c.s, got)
		}
	}
	h1, h2 := contract.NewPublicHandle(), contract.NewPublicHandle()
	k1, k2 := contract.NewOperationKey("codex"), contract.NewOperationKey("codex")
	if h1 == h2 || k1 == k2 {
		t.Error("two new handles or keys are equal")
	}
}

func TestImageLimits(t *testing.T) {
	for _, c := range []struct {
		name string
		got  bool
		want bool
	}{
		{"prompt of one character", contract.ValidPrompt("a"), true},
		{"empty prompt", contract.ValidPrompt(""), false},
		{"prompt of 4000 two-byte characters", contract.ValidPrompt(strings.Repeat("é", contract.PromptMaxChars)), true},
		{"prompt of 4001 characters", contract.ValidPrompt(strings.Repeat("a", contract.PromptMaxChars+1)), false},
		{"prompt with NUL", contract.ValidPrompt("a\x00b"), false},
		{"prompt of invalid UTF-8", contract.ValidPrompt("a\xffb"), false},

		{"model flux-dev", contract.ValidModel("flux-dev"), true},
		{"model flux-pro-1.1", contract.ValidModel("flux-pro-1.1"), true},
		{"model of 64 characters", contract.ValidModel(strings.Repeat("a", 64)), true},
		{"model of 65 characters", contract.ValidModel(strings.Repeat("a", 65)), false},
		{"empty model", contract.ValidModel(""), false},
		{"model in capitals", contract.ValidModel("FLUX-dev"), false},
		{"model starting with a dash", contract.ValidModel("-flux"), false},
		{"model *", contract.ValidModel("*"), false},

		{"side 256", contract.ValidSide(256), true},
		{"side 1024", contract.ValidSide(1024), true},
		{"side 1440", contract.ValidSide(1440), true},
		{"side 224", contract.ValidSide(224), false},
		{"side 1472", contract.ValidSide(1472), false},
		{"side 1000", contract.ValidSide(1000), false},
		{"side 0", contract.ValidSide(0), false},
		{"side -256", contract.ValidSide(-256), false},

		{"seed 0", contract.ValidSeed(0), true},
		{"seed 2^53-1", contract.ValidSeed(1<<53 - 1), true},
		{"seed 2^53", contract.ValidSeed(1 << 53), false},
		{"seed -1", contract.ValidSeed(-1), false},

		{"format png", contract.ValidOutputFormat("png"), true},
		{"format jpeg", contract.ValidOutputFormat("jpeg"), true},
		{"format jpg", contract.ValidOutputFormat("jpg"), false},
		{"format PNG", contract.ValidOutputFormat("PNG"), false},
		{"no format", contract.ValidOutputFormat(""), false},
	} {
		if c.got != c.want {
			t.Errorf("%s: valid is %v", c.name, c.got)
		}
	}
}
