package mcpserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"hubu.dev/hubu/proto/contract"
)

// imageFields are the spend tools' argument names, matched exactly: encoding/json alone would
// also take "Prompt" or "ſeed" for them. input_images is edit_image's alone.
var imageFields = []string{"prompt", "model", "width", "height", "aspect_ratio", "raw", "seed", "output_format", "safety_tolerance", "input_images"}

// parseImageArgs decodes a spend tool's arguments strictly and checks them against the model
// they name (contract.ImageRequest.Check); editing says they are edit_image's.
func parseImageArgs(raw []byte, editing bool) (contract.ImageRequest, error) {
	var a contract.ImageRequest
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return a, errors.New("arguments must be an object")
	}
	for k := range fields {
		if !slices.Contains(imageFields, k) || (k == "input_images" && !editing) {
			return a, errors.New(argumentsTaken(editing))
		}
	}
	str := func(k string, dst *string) error {
		if v, ok := fields[k]; ok && json.Unmarshal(v, dst) != nil {
			return fmt.Errorf("%s must be a string", k)
		}
		return nil
	}
	integer := func(k string) (*int64, error) {
		v, ok := fields[k]
		if !ok {
			return nil, nil
		}
		var n json.Number
		if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) || json.Unmarshal(v, &n) != nil {
			return nil, fmt.Errorf("%s must be an integer", k)
		}
		f, err := n.Float64()
		if err != nil || f != float64(int64(f)) || f < -contract.SeedMax || f > contract.SeedMax {
			return nil, fmt.Errorf("%s must be an integer", k)
		}
		i := int64(f)
		return &i, nil
	}
	// small is an integer argument that is a size or a level: anything beyond int32 is out of
	// every model's range anyway, and is refused as such.
	small := func(k string, dst *int) error {
		n, err := integer(k)
		switch {
		case err != nil:
			return err
		case n != nil && (*n < 0 || *n > 1<<31-1):
			return fmt.Errorf("%s is out of range", k)
		case n != nil:
			*dst = int(*n)
		}
		return nil
	}
	if err := str("prompt", &a.Prompt); err != nil {
		return a, err
	}
	if err := str("model", &a.Model); err != nil {
		return a, err
	}
	if err := str("aspect_ratio", &a.AspectRatio); err != nil {
		return a, err
	}
	if _, ok := fields["aspect_ratio"]; ok && a.AspectRatio == "" {
		return a, errors.New("aspect_ratio must be W:H between 21:9 and 9:21, such as 16:9")
	}
	if _, ok := fields["output_format"]; ok {
		var f string
		if err := str("output_format", &f); err != nil {
			return a, err
		}
		a.OutputFormat = &f
	}
	if v, ok := fields["raw"]; ok {
		var b bool
		if json.Unmarshal(v, &b) != nil {
			return a, errors.New("raw must be true or false")
		}
		a.Raw = &b
	}
	for _, f := range []struct {
		name string
		dst  *int
	}{{"width", &a.Width}, {"height", &a.Height}} {
		if err := small(f.name, f.dst); err != nil {
			return a, err
		}
		if _, ok := fields[f.name]; ok && *f.dst == 0 {
			return a, fmt.Errorf("%s must be positive", f.name)
		}
	}
	if _, ok := fields["safety_tolerance"]; ok {
		var level int
		if err := small("safety_tolerance", &level); err != nil {
			return a, err
		}
		a.SafetyTolerance = &level
	}
	var err error
	if a.Seed, err = integer("seed"); err != nil {
		return a, err
	}
	if v, ok := fields["input_images"]; ok {
		if json.Unmarshal(v, &a.InputImages) != nil || a.InputImages == nil {
			return a, errors.New("input_images must be a list of public handles of earlier results")
		}
	}
	return a, a.Check(editing)
}

// argumentsTaken says which arguments a spend tool takes.
func argumentsTaken(editing bool) string {
	if editing {
		return "arguments take prompt, model and input_images, and optionally " + strings.Join(optionalFields, ", ") + ", and nothing else"
	}
	return "arguments take prompt and model, and optionally " + strings.Join(optionalFields, ", ") + ", and nothing else"
}

var optionalFields = []string{"width", "height", "aspect_ratio", "raw", "seed", "output_format", "safety_tolerance"}

// handleArgs decodes {"public_handle": ...} strictly.
func handleArgs(args []byte) (string, *answer) {
	var fields map[string]json.RawMessage
	var handle string
	err := json.Unmarshal(args, &fields)
	if err == nil {
		err = json.Unmarshal(fields["public_handle"], &handle)
	}
	if err != nil || len(fields) != 1 || !contract.IsPublicHandle(handle) {
		a := refusal(CodeInvalidArguments, "arguments must be {\"public_handle\": \"hubu:public-operation:v1:<uuid>\"}")
		return "", &a
	}
	return handle, nil
}
