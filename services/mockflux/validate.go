package mockflux

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"hubu.dev/hubu/proto/contract"
)

// fluxInput is the part of a FLUX request mockflux acts on; other fields are allowed, as the
// real API has many, and only take part in the idempotency comparison.
type fluxInput struct {
	prompt string
	width  int
	height int
	seed   *int64
	format string
}

// validate checks a canonical body the way the FLUX API does: an absent optional field and a
// null one are the same, and an integral number such as 1024.0 is an integer (canonical JSON
// already spells it 1024). It answers the first problem as a 422 detail.
func validate(model Model, body []byte) (fluxInput, error) {
	var f struct {
		Prompt           *string `json:"prompt"`
		Width            *int    `json:"width"`
		Height           *int    `json:"height"`
		Seed             *int64  `json:"seed"`
		OutputFormat     *string `json:"output_format"`
		PromptUpsampling *bool   `json:"prompt_upsampling"`
		SafetyTolerance  *int    `json:"safety_tolerance"`
	}
	if err := json.Unmarshal(body, &f); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return fluxInput{}, errorf(CodeInvalid, "%s: must be %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()))
		}
		return fluxInput{}, errorf(CodeInvalid, "the body is not a valid FLUX request")
	}
	in := fluxInput{seed: f.Seed, format: contract.FormatPNG}
	if f.Prompt == nil || strings.TrimSpace(*f.Prompt) == "" {
		return fluxInput{}, errorf(CodeInvalid, "prompt: must be a non-empty string")
	}
	in.prompt = *f.Prompt
	switch {
	case f.Width == nil && f.Height == nil && model.SizeOptional:
	case f.Width == nil || f.Height == nil:
		return fluxInput{}, errorf(CodeInvalid, "width and height: both are required for %s", model.Name)
	default:
		if err := cmp.Or(checkSide("width", *f.Width), checkSide("height", *f.Height)); err != nil {
			return fluxInput{}, err
		}
		in.width, in.height = *f.Width, *f.Height
	}
	if f.OutputFormat != nil {
		if !contract.ValidOutputFormat(*f.OutputFormat) {
			return fluxInput{}, errorf(CodeInvalid, "output_format: must be png or jpeg")
		}
		in.format = *f.OutputFormat
	}
	if t := f.SafetyTolerance; t != nil && (*t < 0 || *t > 6) {
		return fluxInput{}, errorf(CodeInvalid, "safety_tolerance: must be between 0 and 6")
	}
	return in, nil
}

func checkSide(name string, v int) error {
	if !contract.ValidSide(int64(v)) {
		return errorf(CodeInvalid, "%s: must be a multiple of %d between %d and %d, not %d", name, contract.SideStep, contract.SideMin, contract.SideMax, v)
	}
	return nil
}

func jsonKind(goKind string) string {
	switch {
	case strings.HasPrefix(goKind, "int"):
		return "an integer"
	case goKind == "string":
		return "a string"
	case goKind == "bool":
		return "a boolean"
	default:
		return fmt.Sprintf("of another type (%s)", goKind)
	}
}
