package mcpserver_test

import (
	"encoding/json"
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
	if p := img["prompt"]; p.MinLength == nil || *p.MinLength != 1 || p.MaxLength == nil || *p.MaxLength != contract.PromptMaxChars {
		t.Errorf("prompt: schema says %v..%v characters, the contract 1..%d", p.MinLength, p.MaxLength, contract.PromptMaxChars)
	}
	for _, side := range []string{"width", "height"} {
		eq(side+" minimum", img[side].Minimum, contract.SideMin)
		eq(side+" maximum", img[side].Maximum, contract.SideMax)
		eq(side+" multipleOf", img[side].MultipleOf, contract.SideStep)
	}
	eq("seed minimum", img["seed"].Minimum, 0)
	eq("seed maximum", img["seed"].Maximum, contract.SeedMax)
	if f := img["output_format"].Enum; len(f) != 2 || f[0] != contract.FormatPNG || f[1] != contract.FormatJPEG {
		t.Errorf("output_format: schema says %v, the contract [%s %s]", f, contract.FormatPNG, contract.FormatJPEG)
	}
	for _, name := range []string{"resume_operation", "operation_status", "get_execution"} {
		if got := schemas[name]["public_handle"].Pattern; got != contract.PublicHandlePattern {
			t.Errorf("%s public_handle pattern %q, the contract %q", name, got, contract.PublicHandlePattern)
		}
	}
}
