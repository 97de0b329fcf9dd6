package mcpserver

import (
	"encoding/json"
	"errors"
	"fmt"

	"hubu.dev/hubu/proto/contract"
)

// imageFields are generate_image's argument names, matched exactly: encoding/json alone
// would also take "Prompt" or "ſeed" for them.
var imageFields = map[string]bool{"prompt": true, "model": true, "width": true, "height": true, "seed": true, "output_format": true}

// parseImageArgs decodes generate_image's arguments strictly.
func parseImageArgs(raw []byte) (contract.ImageRequest, error) {
	var a contract.ImageRequest
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return a, errors.New("arguments must be an object")
	}
	for k := range fields {
		if !imageFields[k] {
			return a, errors.New("arguments take prompt, model, width, height and optionally seed and output_format, and nothing else")
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
	if err := str("prompt", &a.Prompt); err != nil {
		return a, err
	}
	if err := str("model", &a.Model); err != nil {
		return a, err
	}
	if _, ok := fields["output_format"]; ok {
		var f string
		if err := str("output_format", &f); err != nil {
			return a, err
		}
		a.OutputFormat = &f
	}
	w, err := integer("width")
	if err != nil {
		return a, err
	}
	h, err := integer("height")
	if err != nil {
		return a, err
	}
	if a.Seed, err = integer("seed"); err != nil {
		return a, err
	}
	side := func(n *int64) bool { return n != nil && contract.ValidSide(*n) }
	switch {
	case !contract.ValidPrompt(a.Prompt):
		return a, fmt.Errorf("prompt must be 1 to %d characters", contract.PromptMaxChars)
	case !contract.ValidModel(a.Model):
		return a, errors.New("model must be a model name such as flux-dev (see the capabilities tool)")
	case !side(w) || !side(h):
		return a, fmt.Errorf("width and height must be multiples of %d from %d to %d", contract.SideStep, contract.SideMin, contract.SideMax)
	case a.Seed != nil && !contract.ValidSeed(*a.Seed):
		return a, errors.New("seed must be from 0 to 2^53-1")
	case a.OutputFormat != nil && !contract.ValidOutputFormat(*a.OutputFormat):
		return a, fmt.Errorf("output_format must be %s or %s", contract.FormatPNG, contract.FormatJPEG)
	}
	a.Width, a.Height = int(*w), int(*h)
	return a, nil
}

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
