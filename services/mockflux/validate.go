package mockflux

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // input images
	_ "image/png"
	"math"
	"net/url"
	"strconv"
	"strings"

	_ "golang.org/x/image/webp"

	"hubu.dev/hubu/proto/contract"
)

// fluxInput is the part of a FLUX request mockflux acts on; other fields are allowed, as the
// real API has many, and only take part in the idempotency comparison.
type fluxInput struct {
	prompt        string
	width, height int // the output's size, resolved
	seed          *int64
	format        string
	inputPixels   []int64
}

// inputImageFields are the input image fields, in order: input_image, input_image_2, …
var inputImageFields = []string{"input_image", "input_image_2", "input_image_3", "input_image_4",
	"input_image_5", "input_image_6", "input_image_7", "input_image_8"}

// validate checks a canonical body the way the FLUX API documents it for the model (what each
// model takes and its limits are proto/contract's): an absent optional field and a null one are
// the same, and an integral number such as 1024.0 is an integer (canonical JSON already spells
// it 1024). Input images are base64 of PNG, JPEG or WebP bytes (the real API also fetches URLs;
// mockflux does not). It answers the first problem as a 422 detail.
func validate(model Model, body []byte) (fluxInput, error) {
	var f struct {
		Prompt           *string `json:"prompt"`
		Width            *int    `json:"width"`
		Height           *int    `json:"height"`
		AspectRatio      *string `json:"aspect_ratio"`
		Raw              *bool   `json:"raw"`
		Seed             *int64  `json:"seed"`
		OutputFormat     *string `json:"output_format"`
		PromptUpsampling *bool   `json:"prompt_upsampling"`
		SafetyTolerance  *int    `json:"safety_tolerance"`
	}
	if err := json.Unmarshal(body, &f); err != nil {
		return fluxInput{}, typeProblem(err)
	}
	m := model.Model
	in := fluxInput{seed: f.Seed, format: contract.FormatDefault}
	if f.Prompt == nil || strings.TrimSpace(*f.Prompt) == "" {
		return fluxInput{}, errorf(CodeInvalid, "prompt: must be a non-empty string")
	}
	in.prompt = *f.Prompt
	if !contract.ValidPrompt(in.prompt, m.PromptMaxChars) {
		return fluxInput{}, errorf(CodeInvalid, "prompt: must be at most %d characters", m.PromptMaxChars)
	}
	var err error
	if in.inputPixels, err = inputImages(m, body); err != nil {
		return fluxInput{}, err
	}
	if in.width, in.height, err = outputSize(m, f.Width, f.Height, f.AspectRatio, in.inputPixels); err != nil {
		return fluxInput{}, err
	}
	if f.Raw != nil && !m.Raw {
		return fluxInput{}, errorf(CodeInvalid, "raw: not a parameter of %s", m.Name)
	}
	if f.OutputFormat != nil {
		if !contract.ValidOutputFormat(*f.OutputFormat) {
			return fluxInput{}, errorf(CodeInvalid, "output_format: must be jpeg or png")
		}
		in.format = *f.OutputFormat
	}
	safetyMax := m.SafetyMax
	if len(in.inputPixels) > 0 {
		safetyMax = m.SafetyMaxEdit
	}
	if t := f.SafetyTolerance; t != nil && (*t < 0 || *t > safetyMax) {
		return fluxInput{}, errorf(CodeInvalid, "safety_tolerance: must be between 0 and %d", safetyMax)
	}
	return in, nil
}

// typeProblem is a JSON decoding error as a 422 detail.
func typeProblem(err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return errorf(CodeInvalid, "%s: must be %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()))
	}
	return errorf(CodeInvalid, "the body is not a valid FLUX request")
}

// inputImages decodes a request's input images (base64 of PNG, JPEG or WebP bytes), in
// order, and returns each one's pixels; the fields must be filled from the first on, no more
// than the model takes.
func inputImages(m contract.Model, body []byte) ([]int64, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, errorf(CodeInvalid, "the body is not a valid FLUX request")
	}
	var out []int64
	for i, name := range inputImageFields {
		raw, ok := fields[name]
		if !ok || string(raw) == "null" {
			for _, later := range inputImageFields[i+1:] {
				if v, ok := fields[later]; ok && string(v) != "null" {
					return nil, errorf(CodeInvalid, "%s: given without %s", later, name)
				}
			}
			break
		}
		if i >= m.MaxInputImages {
			return nil, errorf(CodeInvalid, "%s: %s takes at most %d input images", name, m.Name, m.MaxInputImages)
		}
		var encoded string
		if json.Unmarshal(raw, &encoded) != nil {
			return nil, errorf(CodeInvalid, "%s: must be a string", name)
		}
		if strings.HasPrefix(encoded, "http://") || strings.HasPrefix(encoded, "https://") {
			return nil, errorf(CodeInvalid, "%s: mockflux takes input images as base64, not URLs", name)
		}
		b, err := base64.StdEncoding.DecodeString(encoded)
		if err != nil {
			return nil, errorf(CodeInvalid, "%s: not base64", name)
		}
		if len(b) > MaxInputImageBytes {
			return nil, errorf(CodeInvalid, "%s: larger than 20 MB", name)
		}
		cfg, _, err := image.DecodeConfig(bytes.NewReader(b))
		if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
			return nil, errorf(CodeInvalid, "%s: not a PNG, JPEG or WebP image", name)
		}
		if px := int64(cfg.Width) * int64(cfg.Height); px > 20_000_000 {
			return nil, errorf(CodeInvalid, "%s: more than 20 megapixels", name)
		} else {
			out = append(out, px)
		}
	}
	return out, nil
}

// MaxInputImageBytes is the largest input image the API takes (BFL: 20 MB).
const MaxInputImageBytes = 20 << 20

// outputSize is the size a job makes: the width and height asked for (FLUX.2, FLUX1.1 [pro],
// FLUX.1 [dev]), else the model's default, or an edit's first input's size on FLUX.2; for a
// model sized by aspect ratio, its megapixels at the ratio asked for (or its default).
func outputSize(m contract.Model, width, height *int, aspect *string, inputs []int64) (int, int, error) {
	if m.Sizing == contract.SizeByAspectRatio {
		if width != nil || height != nil {
			return 0, 0, errorf(CodeInvalid, "width and height: not parameters of %s (it takes aspect_ratio)", m.Name)
		}
		ratio := m.DefaultAspectRatio
		if aspect != nil {
			ratio = *aspect
		}
		if !contract.ValidAspectRatio(ratio) {
			return 0, 0, errorf(CodeInvalid, "aspect_ratio: must be W:H between 21:9 and 9:21")
		}
		w, h := ratioSides(ratio)
		megapixels := 1.0 // Kontext
		if m.Raw {
			megapixels = 4 // Ultra
		}
		scale := math.Sqrt(megapixels * contract.Megapixel / (w * h))
		return int(w*scale) / 16 * 16, int(h*scale) / 16 * 16, nil
	}
	if aspect != nil {
		return 0, 0, errorf(CodeInvalid, "aspect_ratio: not a parameter of %s (it takes width and height)", m.Name)
	}
	switch {
	case (width == nil) != (height == nil):
		return 0, 0, errorf(CodeInvalid, "width and height: give both or neither")
	case width != nil && !m.ValidSize(*width, *height):
		return 0, 0, errorf(CodeInvalid, "width and height: must be multiples of %d between %d and %d, at most %d pixels in all, not %dx%d",
			m.SideStep, m.SideMin, m.SideMax, m.MaxPixels, *width, *height)
	case width != nil:
		return *width, *height, nil
	case len(inputs) > 0:
		// An edit that names no size: the first input's, which the caller knows; mockflux has
		// only its pixels, so it takes a square of them.
		side := int(math.Sqrt(float64(min(inputs[0], int64(m.MaxPixels))))) / m.SideStep * m.SideStep
		return side, side, nil
	}
	return m.DefaultWidth, m.DefaultHeight, nil
}

// ratioSides reads a valid aspect ratio's sides.
func ratioSides(ratio string) (float64, float64) {
	w, h, _ := strings.Cut(ratio, ":")
	wn, _ := strconv.Atoi(w)
	hn, _ := strconv.Atoi(h)
	return float64(wn), float64(hn)
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
