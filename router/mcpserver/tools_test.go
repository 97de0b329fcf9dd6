package mcpserver_test

import (
	"encoding/json"
	"slices"
	"testing"

	"hubu.dev/hubu/proto/contract"
)

// The input schemas a harness reads state the limits proto/contract enforces: a model that
// follows the schema is never refused by the router's own checks.
//
// The tools declare no outputSchema, so the official TypeScript client, which validates
// structuredContent against a declared one even when isError is true, accepts every result
// shape (charged_micros included). Declaring one means proving every result valid.
func TestToolSchemas(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	tools, err := e.session.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	type property struct {
		MinLength  *int     `json:"minLength"`
		MaxLength  *int     `json:"maxLength"`
		Minimum    *int64   `json:"minimum"`
		Maximum    *int64   `json:"maximum"`
		MultipleOf *int64   `json:"multipleOf"`
		Enum       []string `json:"enum"`
		Pattern    string   `json:"pattern"`
	}
	schemas := map[string]map[string]property{}
	for _, tool := range tools.Tools {
		if tool.OutputSchema != nil {
			t.Errorf("%s declares an outputSchema: every result, errors included, must then validate against it", tool.Name)
		}
		raw, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Properties map[string]property `json:"properties"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		schemas[tool.Name] = s.Properties
	}
	eq := func(what string, got *int64, want int64) {
		t.Helper()
		if got == nil || *got != want {
			t.Errorf("%s: schema says %v, the contract %d", what, got, want)
		}
	}
	img := schemas["generate_image"]
	if p := img["prompt"]; p.MinLength == nil || *p.MinLength != 1 || p.MaxLength == nil || *p.MaxLength != contract.PromptMaxFLUX2 {
		t.Errorf("prompt: schema says %v..%v characters, the contract 1..%d", p.MinLength, p.MaxLength, contract.PromptMaxFLUX2)
	}
	if got, want := img["model"].Enum, contract.ModelNames(false); !slices.Equal(got, want) {
		t.Errorf("model: schema says %v, the contract %v", got, want)
	}
	// Every model's own sides lie within the schema's, on its step.
	for _, m := range contract.Models {
		if m.Sizing != contract.SizeInPixels {
			continue
		}
		for _, side := range []string{"width", "height"} {
			p := img[side]
			if p.Minimum == nil || p.Maximum == nil || p.MultipleOf == nil ||
				int64(m.SideMin) < *p.Minimum || int64(m.SideMax) > *p.Maximum || int64(m.SideStep)%*p.MultipleOf != 0 {
				t.Errorf("%s %s: schema %v..%v step %v does not hold the model's %d..%d step %d", m.Name, side, p.Minimum, p.Maximum, p.MultipleOf, m.SideMin, m.SideMax, m.SideStep)
			}
		}
	}
	if got := img["aspect_ratio"].Pattern; got != contract.AspectRatioPattern {
		t.Errorf("aspect_ratio pattern %q, the contract %q", got, contract.AspectRatioPattern)
	}
	eq("seed minimum", img["seed"].Minimum, 0)
	eq("seed maximum", img["seed"].Maximum, contract.SeedMax)
	eq("safety_tolerance minimum", img["safety_tolerance"].Minimum, 0)
	eq("safety_tolerance maximum", img["safety_tolerance"].Maximum, 6)
	if f := img["output_format"].Enum; !slices.Equal(f, []string{contract.FormatJPEG, contract.FormatPNG}) {
		t.Errorf("output_format: schema says %v, the contract [%s %s]", f, contract.FormatJPEG, contract.FormatPNG)
	}
	if _, ok := img["input_images"]; ok {
		t.Error("generate_image takes input_images")
	}
	edit := schemas["edit_image"]
	if got, want := edit["model"].Enum, contract.ModelNames(true); !slices.Equal(got, want) || slices.Contains(got, "flux-dev") {
		t.Errorf("edit_image model: schema says %v, the contract %v", got, want)
	}
	if _, ok := edit["input_images"]; !ok {
		t.Error("edit_image takes no input_images")
	}
	if _, ok := edit["raw"]; ok {
		t.Error("edit_image takes raw, which only Ultra (which does not edit) takes")
	}
	for _, name := range []string{"resume_operation", "operation_status", "get_execution"} {
		if got := schemas[name]["public_handle"].Pattern; got != contract.PublicHandlePattern {
			t.Errorf("%s public_handle pattern %q, the contract %q", name, got, contract.PublicHandlePattern)
		}
	}
}
