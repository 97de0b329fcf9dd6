package mockflux

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
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

// takeWebhook removes webhook_url and webhook_secret from a parsed body, before the body is
// hashed (they say where to report a task, not what to make, so a resubmission with another
// webhook is the same request), and checks them: both or neither, an absolute http(s) URL
// and a secret of MinWebhookSecret to MaxWebhookSecret bytes. Null is absent, as for the other
// optional fields. The secret's value never reaches an error detail.
func takeWebhook(obj map[string]any) (Webhook, error) {
	rawURL, hasURL, err := takeString(obj, "webhook_url")
	if err != nil {
		return Webhook{}, err
	}
	secret, hasSecret, err := takeString(obj, "webhook_secret")
	if err != nil {
		return Webhook{}, err
	}
	switch {
	case !hasURL && !hasSecret:
		return Webhook{}, nil
	case !hasURL || !hasSecret:
		return Webhook{}, errorf(CodeInvalid, "webhook_url and webhook_secret: send both or neither")
	case len(rawURL) > MaxWebhookURL:
		return Webhook{}, errorf(CodeInvalid, "webhook_url: must be at most %d bytes", MaxWebhookURL)
	case len(secret) < MinWebhookSecret || len(secret) > MaxWebhookSecret:
		return Webhook{}, errorf(CodeInvalid, "webhook_secret: must be %d to %d bytes, not %d", MinWebhookSecret, MaxWebhookSecret, len(secret))
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return Webhook{}, errorf(CodeInvalid, "webhook_url: must be an absolute http or https URL")
	}
	return Webhook{URL: rawURL, Secret: Secret(secret)}, nil
}

// takeString removes key from obj and returns its string value; present is false when the key
// is absent or null.
func takeString(obj map[string]any, key string) (value string, present bool, err error) {
	v, ok := obj[key]
	delete(obj, key)
	if !ok || v == nil {
		return "", false, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", false, errorf(CodeInvalid, "%s: must be a string", key)
	}
	return s, true, nil
}
