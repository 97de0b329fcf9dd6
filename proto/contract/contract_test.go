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

// Each spec's arguments state the widest limits any model allows, as the contract has them
// (contract.Widest, which CheckShape enforces): Hubu's and Gongbu's every one; the FLUX API's
// the sides', the formats' and the safety level's.
func TestSpecsStateTheImageLimits(t *testing.T) {
	w := contract.Widest
	for _, c := range []struct {
		spec, schema string
		complete     bool
	}{
		{"hubu", "ImageArguments", true},
		{"gongbu", "ImageArguments", true},
		{"bfl", "FluxRequest", false},
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
			limit("prompt maxLength", length(prompt.MaxLength), float64(w.PromptMaxChars), c.complete)
			for _, side := range []string{"width", "height"} {
				s := prop(side)
				limit(side+" minimum", s.Min, float64(w.SideMin), true)
				limit(side+" maximum", s.Max, float64(w.SideMax), true)
				limit(side+" multipleOf", s.MultipleOf, float64(w.SideStep), true)
			}
			seed := prop("seed")
			limit("seed minimum", seed.Min, 0, c.complete)
			limit("seed maximum", seed.Max, contract.SeedMax, c.complete)
			safety := prop("safety_tolerance")
			limit("safety_tolerance minimum", safety.Min, 0, true)
			limit("safety_tolerance maximum", safety.Max, float64(w.SafetyMax), true)
			if got := prop("output_format").Enum; !slices.Equal(got, []any{contract.FormatJPEG, contract.FormatPNG}) {
				t.Errorf("output_format enum: spec %v, contract [jpeg png]", got)
			}
			if !c.complete {
				return
			}
			if p := prop("aspect_ratio").Pattern; p != contract.AspectRatioPattern {
				t.Errorf("aspect_ratio pattern: spec %q, contract %q", p, contract.AspectRatioPattern)
			}
			images := prop("input_images")
			limit("input_images maxItems", length(images.MaxItems), float64(w.MaxInputImages), true)
			if images.Items == nil || images.Items.Value == nil || images.Items.Value.Pattern != contract.PublicHandlePattern {
				t.Errorf("input_images items: not the public handle's pattern")
			}
			model := prop("model")
			if p := model.Pattern; p != contract.ModelPattern {
				t.Errorf("model pattern: spec %q, contract %q", p, contract.ModelPattern)
			}
			if n := model.MinLength; n > 0 && (!contract.ValidModel(strings.Repeat("a", int(n))) || contract.ValidModel(strings.Repeat("a", int(n)-1))) {
				t.Errorf("model minLength %d is not the contract's pattern's", n)
			}
			if n := model.MaxLength; n != nil && (!contract.ValidModel(strings.Repeat("a", int(*n))) || contract.ValidModel(strings.Repeat("a", int(*n)+1))) {
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
	full := keys(contract.ImageRequest{Prompt: "p", Model: "m", Width: 256, Height: 256, AspectRatio: "1:1", Raw: new(true), Seed: new(int64(7)),
		OutputFormat: new(contract.FormatPNG), SafetyTolerance: new(2), InputImages: []string{contract.NewPublicHandle()}})
	bare := keys(contract.ImageRequest{})
	for spec, schema := range map[string]string{"hubu": "ImageArguments", "gongbu": "ImageArguments"} {
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
	flux2, _ := contract.ModelNamed("flux-2-pro")
	flux1, _ := contract.ModelNamed("flux-pro-1.1")
	for _, c := range []struct {
		name string
		got  bool
		want bool
	}{
		{"prompt of one character", contract.ValidPrompt("a", 10), true},
		{"empty prompt", contract.ValidPrompt("", 10), false},
		{"prompt of 4000 two-byte characters", contract.ValidPrompt(strings.Repeat("é", 4000), contract.PromptMaxFLUX1), true},
		{"prompt of 4001 characters", contract.ValidPrompt(strings.Repeat("a", 4001), contract.PromptMaxFLUX1), false},
		{"prompt with NUL", contract.ValidPrompt("a\x00b", 10), false},
		{"prompt of invalid UTF-8", contract.ValidPrompt("a\xffb", 10), false},

		{"model flux-dev", contract.ValidModel("flux-dev"), true},
		{"model flux-pro-1.1", contract.ValidModel("flux-pro-1.1"), true},
		{"model of 64 characters", contract.ValidModel(strings.Repeat("a", 64)), true},
		{"model of 65 characters", contract.ValidModel(strings.Repeat("a", 65)), false},
		{"empty model", contract.ValidModel(""), false},
		{"model in capitals", contract.ValidModel("FLUX-dev"), false},
		{"model starting with a dash", contract.ValidModel("-flux"), false},
		{"model *", contract.ValidModel("*"), false},

		{"FLUX.2 1024x1024", flux2.ValidSize(1024, 1024), true},
		{"FLUX.2 2048x2048 (4 MP)", flux2.ValidSize(2048, 2048), true},
		{"FLUX.2 2048x2064 (over 4 MP)", flux2.ValidSize(2048, 2064), false},
		{"FLUX.2 64x4096", flux2.ValidSize(64, 4096), true},
		{"FLUX.2 48x1024", flux2.ValidSize(48, 1024), false},
		{"FLUX.2 1000x1024", flux2.ValidSize(1000, 1024), false},
		{"FLUX1.1 1440x1440", flux1.ValidSize(1440, 1440), true},
		{"FLUX1.1 1472x256", flux1.ValidSize(1472, 256), false},
		{"FLUX1.1 1008x1024 (not /32)", flux1.ValidSize(1008, 1024), false},
		{"FLUX1.1 224x256", flux1.ValidSize(224, 256), false},

		{"ratio 16:9", contract.ValidAspectRatio("16:9"), true},
		{"ratio 21:9", contract.ValidAspectRatio("21:9"), true},
		{"ratio 9:21", contract.ValidAspectRatio("9:21"), true},
		{"ratio 22:9", contract.ValidAspectRatio("22:9"), false},
		{"ratio 1:3", contract.ValidAspectRatio("1:3"), false},
		{"ratio 16x9", contract.ValidAspectRatio("16x9"), false},
		{"ratio 0:1", contract.ValidAspectRatio("0:1"), false},
		{"ratio 100:99", contract.ValidAspectRatio("100:99"), false},

		{"seed 0", contract.ValidSeed(0), true},
		{"seed 2^53-1", contract.ValidSeed(1<<53 - 1), true},
		{"seed 2^53", contract.ValidSeed(1 << 53), false},
		{"seed -1", contract.ValidSeed(-1), false},

		{"format png", contract.ValidOutputFormat("png"), true},
		{"format jpeg", contract.ValidOutputFormat("jpeg"), true},
		{"format jpg", contract.ValidOutputFormat("jpg"), false},
		{"format PNG", contract.ValidOutputFormat("PNG"), false},
		{"format webp", contract.ValidOutputFormat("webp"), false},
		{"no format", contract.ValidOutputFormat(""), false},
	} {
		if c.got != c.want {
			t.Errorf("%s: valid is %v", c.name, c.got)
		}
	}
}

// Each model takes the parameters BFL documents for it, and each refusal names what to change.
func TestCheck(t *testing.T) {
	h := contract.NewPublicHandle()
	req := func(model string, change func(*contract.ImageRequest)) contract.ImageRequest {
		r := contract.ImageRequest{Prompt: "an origami fox", Model: model}
		if change != nil {
			change(&r)
		}
		return r
	}
	for _, c := range []struct {
		name    string
		r       contract.ImageRequest
		editing bool
		err     string
	}{
		{"FLUX.2 with defaults", req("flux-2-pro", nil), false, ""},
		{"FLUX.2 at 4 MP", req("flux-2-max", func(r *contract.ImageRequest) { r.Width, r.Height = 2048, 2048 }), false, ""},
		{"FLUX.2 over 4 MP", req("flux-2-max", func(r *contract.ImageRequest) { r.Width, r.Height = 4096, 1040 }), false, "at most 4 MP"},
		{"FLUX.2 a width alone", req("flux-2-pro", func(r *contract.ImageRequest) { r.Width = 1024 }), false, "give both or neither"},
		{"FLUX.2 safety 5", req("flux-2-flex", func(r *contract.ImageRequest) { r.SafetyTolerance = new(5) }), false, ""},
		{"FLUX.2 safety 6", req("flux-2-flex", func(r *contract.ImageRequest) { r.SafetyTolerance = new(6) }), false, "from 0 (strictest) to 5"},
		{"FLUX.2 a ratio", req("flux-2-pro", func(r *contract.ImageRequest) { r.AspectRatio = "16:9" }), false, "takes width and height, not aspect_ratio"},
		{"FLUX.2 raw", req("flux-2-pro", func(r *contract.ImageRequest) { r.Raw = new(true) }), false, "raw is for flux-pro-1.1-ultra only"},
		{"FLUX.2 a long prompt", req("flux-2-klein-4b", func(r *contract.ImageRequest) { r.Prompt = strings.Repeat("a", 32_000) }), false, ""},
		{"FLUX.2 a prompt too long", req("flux-2-klein-4b", func(r *contract.ImageRequest) { r.Prompt = strings.Repeat("a", 32_001) }), false, "1 to 32000 characters"},
		{"FLUX1.1 a prompt too long", req("flux-pro-1.1", func(r *contract.ImageRequest) { r.Prompt = strings.Repeat("a", 4_001) }), false, "1 to 4000 characters"},
		{"FLUX1.1 a FLUX.2 size", req("flux-pro-1.1", func(r *contract.ImageRequest) { r.Width, r.Height = 2048, 1024 }), false, "multiples of 32 from 256 to 1440"},
		{"FLUX1.1 safety 6", req("flux-pro-1.1", func(r *contract.ImageRequest) { r.SafetyTolerance = new(6) }), false, ""},
		{"Ultra raw and a ratio", req("flux-pro-1.1-ultra", func(r *contract.ImageRequest) { r.Raw, r.AspectRatio = new(true), "9:21" }), false, ""},
		{"Ultra a size", req("flux-pro-1.1-ultra", func(r *contract.ImageRequest) { r.Width, r.Height = 1024, 1024 }), false, "takes aspect_ratio, not width and height"},
		{"Ultra a ratio too wide", req("flux-pro-1.1-ultra", func(r *contract.ImageRequest) { r.AspectRatio = "3:1" }), false, "between 21:9 and 9:21"},
		{"an unknown model", req("flux-schnell", nil), false, "model must be one of flux-2-pro"},
		{"a webp", req("flux-2-pro", func(r *contract.ImageRequest) { r.OutputFormat = new("webp") }), false, "output_format must be jpeg"},
		{"input images to generate", req("flux-2-pro", func(r *contract.ImageRequest) { r.InputImages = []string{h} }), false, "input_images are edit_image's"},

		{"an edit", req("flux-2-pro", func(r *contract.ImageRequest) { r.InputImages = []string{h} }), true, ""},
		{"an edit without images", req("flux-2-pro", nil), true, "input_images must name 1 to 8"},
		{"an edit of 9 images", req("flux-2-pro", func(r *contract.ImageRequest) {
			for range 9 {
				r.InputImages = append(r.InputImages, contract.NewPublicHandle())
			}
		}), true, "1 to 8"},
		{"a klein edit of 5 images", req("flux-2-klein-9b", func(r *contract.ImageRequest) {
			for range 5 {
				r.InputImages = append(r.InputImages, contract.NewPublicHandle())
			}
		}), true, "1 to 4"},
		{"an image twice", req("flux-2-pro", func(r *contract.ImageRequest) { r.InputImages = []string{h, h} }), true, "names " + h + " twice"},
		{"an image that is no handle", req("flux-2-pro", func(r *contract.ImageRequest) { r.InputImages = []string{"https://example.com/a.png"} }), true, "public handles"},
		{"a Kontext edit at safety 2", req("flux-kontext-pro", func(r *contract.ImageRequest) { r.InputImages, r.SafetyTolerance = []string{h}, new(2) }), true, ""},
		{"a Kontext edit at safety 3", req("flux-kontext-pro", func(r *contract.ImageRequest) { r.InputImages, r.SafetyTolerance = []string{h}, new(3) }), true, "to 2 for flux-kontext-pro when editing"},
		{"an edit by a model that does not edit", req("flux-pro-1.1-ultra", func(r *contract.ImageRequest) { r.InputImages = []string{h} }), true, "does not edit images"},
	} {
		err := c.r.Check(c.editing)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.err)
		}
		if c.err == "" {
			if err := c.r.CheckShape(); err != nil {
				t.Errorf("%s: a request its model takes is refused by the shape check: %v", c.name, err)
			}
		}
	}
}

// The size a request makes is the one it names, else its model's default, or (an edit on
// FLUX.2) its first input's, shrunk to 4 MP and cut to multiples of 16.
func TestResolveSize(t *testing.T) {
	h := contract.NewPublicHandle()
	dims := func(w, h int) *contract.Dimensions { return &contract.Dimensions{Width: w, Height: h} }
	for _, c := range []struct {
		r     contract.ImageRequest
		first *contract.Dimensions
		want  string
	}{
		{contract.ImageRequest{Model: "flux-2-pro"}, nil, "1024x1024"},
		{contract.ImageRequest{Model: "flux-2-pro", Width: 1920, Height: 1072}, nil, "1920x1072"},
		{contract.ImageRequest{Model: "flux-pro-1.1"}, nil, "1024x768"},
		{contract.ImageRequest{Model: "flux-dev"}, nil, "1024x768"},
		{contract.ImageRequest{Model: "flux-pro-1.1-ultra"}, nil, "16:9"},
		{contract.ImageRequest{Model: "flux-pro-1.1-ultra", AspectRatio: "21:9"}, nil, "21:9"},
		{contract.ImageRequest{Model: "flux-kontext-max"}, nil, "1:1"},
		{contract.ImageRequest{Model: "flux-kontext-pro", InputImages: []string{h}}, nil, "1:1"},
		{contract.ImageRequest{Model: "flux-2-pro", InputImages: []string{h}}, dims(1440, 816), "1440x816"},
		{contract.ImageRequest{Model: "flux-2-pro", InputImages: []string{h}}, dims(1000, 1000), "992x992"},
		{contract.ImageRequest{Model: "flux-2-pro", InputImages: []string{h}}, dims(4096, 4096), "2048x2048"},
		{contract.ImageRequest{Model: "flux-2-pro", InputImages: []string{h}}, dims(2752, 1536), "2736x1520"},
		{contract.ImageRequest{Model: "flux-2-pro", InputImages: []string{h}, Width: 512, Height: 512}, dims(4096, 4096), "512x512"},
	} {
		got, err := c.r.ResolveSize(c.first)
		if err != nil || got != c.want {
			t.Errorf("%+v from %v: %q %v, want %q", c.r, c.first, got, err, c.want)
		}
		if d, ok := contract.ParseSize(got); ok {
			m, _ := contract.ModelNamed(c.r.Model)
			if !m.ValidSize(d.Width, d.Height) {
				t.Errorf("%+v: resolved to %s, which %s does not make", c.r, got, m.Name)
			}
		}
	}
	if _, err := (contract.ImageRequest{Model: "flux-2-pro", InputImages: []string{h}}).ResolveSize(nil); err == nil {
		t.Error("an edit resolved without its first input's size")
	}
}
