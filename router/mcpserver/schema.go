package mcpserver

import (
	"encoding/json"
	"fmt"
	"strings"

	"hubu.dev/hubu/proto/contract"
)

// The spend tools' input schemas are made from the contract's models, so that what a harness
// reads is what the router checks: a model that follows the schema is refused only by a
// per-model limit the descriptions state. They expose no identity field and refuse extra
// properties: the model says what to buy, the harness says which call it is.
var (
	generateImageSchema = imageSchema(false)
	editImageSchema     = imageSchema(true)
)

func imageSchema(editing bool) json.RawMessage {
	var flux2, flux1, aspect, editors []string
	for _, m := range contract.Models {
		if editing && m.MaxInputImages == 0 {
			continue
		}
		switch {
		case m.Sizing == contract.SizeByAspectRatio:
			aspect = append(aspect, m.Name)
		case m.FLUX2:
			flux2 = append(flux2, m.Name)
		default:
			flux1 = append(flux1, m.Name)
		}
		if m.MaxInputImages > 0 {
			editors = append(editors, fmt.Sprintf("%s up to %d", m.Name, m.MaxInputImages))
		}
	}
	w := contract.Widest
	promptMax, sideMin, sideMax, step := w.PromptMaxChars, w.SideMin, w.SideMax, w.SideStep
	props := map[string]any{
		"prompt": map[string]any{"type": "string", "minLength": 1, "maxLength": promptMax,
			"description": fmt.Sprintf("What the image shows%s. FLUX.2 models take up to %d characters, the others %d.",
				map[bool]string{true: ", or how to change the input images", false: ""}[editing], contract.PromptMaxFLUX2, contract.PromptMaxFLUX1)},
		"model": map[string]any{"type": "string", "enum": contract.ModelNames(editing),
			"description": "A FLUX model; the capabilities tool has each one's price."},
		"width": map[string]any{"type": "integer", "minimum": sideMin, "maximum": sideMax, "multipleOf": step,
			"description": sizeText(flux2, flux1, editing)},
		"height": map[string]any{"type": "integer", "minimum": sideMin, "maximum": sideMax, "multipleOf": step,
			"description": "With width; see width."},
		"aspect_ratio": map[string]any{"type": "string", "pattern": contract.AspectRatioPattern,
			"description": fmt.Sprintf("For %s only: W:H between 21:9 and 9:21 (default 16:9 for Ultra, 1:1 for Kontext%s).",
				strings.Join(aspect, ", "), map[bool]string{true: ", whose edits keep the input's shape by default", false: ""}[editing])},
		"seed": map[string]any{"type": "integer", "minimum": 0, "maximum": contract.SeedMax,
			"description": "The same seed, prompt and settings make the same image; without one, a random seed."},
		"output_format": map[string]any{"type": "string", "enum": []string{contract.FormatJPEG, contract.FormatPNG},
			"description": "jpeg (the default) or png."},
		"safety_tolerance": map[string]any{"type": "integer", "minimum": 0, "maximum": w.SafetyMax,
			"description": safetyText(editing)},
	}
	required := []string{"prompt", "model"}
	if editing {
		required = append(required, "input_images")
		props["input_images"] = map[string]any{"type": "array", "minItems": 1, "maxItems": w.MaxInputImages, "uniqueItems": true,
			"items": map[string]any{"type": "string", "pattern": contract.PublicHandlePattern},
			"description": "The images to edit or combine: public handles of your own earlier results (generate_image or edit_image), " +
				"the first one the main image. At most " + strings.Join(editors, ", ") + ". Each input's megapixels are priced."}
	} else {
		props["raw"] = map[string]any{"type": "boolean", "description": "For flux-pro-1.1-ultra only: less processed, more natural-looking images."}
	}
	b, err := json.Marshal(map[string]any{"type": "object", "additionalProperties": false, "required": required, "properties": props})
	if err != nil {
		panic(err) // a literal: cannot fail
	}
	return b
}

func sizeText(flux2, flux1 []string, editing bool) string {
	text := fmt.Sprintf("With height, for %s: multiples of 16, at most 4 MP in all (default 1024x1024", strings.Join(flux2, ", "))
	if editing {
		text = fmt.Sprintf("With height, for %s: multiples of 16, at most 4 MP in all (default: the first input image's size", strings.Join(flux2, ", "))
	}
	text += "; each output megapixel is priced)"
	if len(flux1) > 0 {
		text += fmt.Sprintf("; for %s: multiples of 32 from 256 to 1440 (default 1024x768)", strings.Join(flux1, ", "))
	}
	return text + ". Not for the models that take aspect_ratio."
}

func safetyText(editing bool) string {
	if editing {
		return "Moderation, 0 the strictest (default 2): FLUX.2 up to 5, Kontext up to 2 when editing."
	}
	return "Moderation, 0 the strictest (default 2): FLUX.2 up to 5, the FLUX.1 models up to 6."
}
