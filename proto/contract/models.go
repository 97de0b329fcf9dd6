package contract

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The FLUX models Hubu can spend on, each with the parameters and limits Black Forest Labs
// documents for its endpoint (docs/bfl.md says where each comes from). Every layer reads them
// from here: the router's tool schemas and argument checks, Hubu's validation and pricing,
// Gongbu's submissions and mockflux's validation. Prices are not here: they are the operator's
// (Hubu's catalog) and the provider's (mockflux's copy of BFL's list).

// Sizing is how a model is told the size of its output.
type Sizing int

const (
	// SizeInPixels: width and height, each a multiple of the model's step, the product
	// bounded.
	SizeInPixels Sizing = iota
	// SizeByAspectRatio: an aspect ratio, W:H between 21:9 and 9:21; the model chooses the
	// pixels (about 1 MP for Kontext, up to 4 MP for Ultra).
	SizeByAspectRatio
)

// Model is one FLUX endpoint, POST /v1/<Name>.
type Model struct {
	Name  string
	Title string // BFL's name for it
	// FLUX2 models are priced per megapixel of output and of input images.
	FLUX2  bool
	Sizing Sizing
	// With SizeInPixels: each side a multiple of SideStep from SideMin to SideMax, at most
	// MaxPixels in all; DefaultWidth x DefaultHeight when the request names no size.
	SideMin, SideMax, SideStep int
	MaxPixels                  int
	DefaultWidth               int
	DefaultHeight              int
	// DefaultAspectRatio is the ratio of a SizeByAspectRatio model when the request names none.
	DefaultAspectRatio string
	// MaxInputImages is how many images an edit may give the model; 0: it does not edit.
	MaxInputImages int
	// SafetyMax is the most permissive safety_tolerance (0 is the strictest); SafetyMaxEdit
	// the most permissive with input images.
	SafetyMax, SafetyMaxEdit int
	// Raw says the model takes raw (less processed, more natural-looking images).
	Raw bool
	// PromptMaxChars is the longest prompt, in characters.
	PromptMaxChars int
}

// Megapixel is what BFL counts as one megapixel: 2^20 pixels (2048x2048 is its "4 MP", and it
// reports 1024x1024 as output_mp 1.0).
const Megapixel = 1 << 20

// The limits every model shares.
const (
	SafetyDefault     = 2
	FormatJPEG        = "jpeg"
	FormatPNG         = "png"
	FormatDefault     = FormatJPEG // BFL's default output_format
	PromptMaxFLUX2    = 32_000     // BFL: up to 32K tokens; Hubu counts characters
	PromptMaxFLUX1    = 4_000
	SeedMax           = 1<<53 - 1 // the largest integer every JSON reader keeps exactly
	AspectRatioWidest = 21.0 / 9
	// ModelPattern is a model name's shape: Models decides which names exist.
	ModelPattern = `^[a-z0-9][a-z0-9._-]{0,63}$`
	// AspectRatioPattern is an aspect ratio's shape, W:H.
	AspectRatioPattern = `^[1-9][0-9]?:[1-9][0-9]?$`
)

var flux2 = Model{
	FLUX2: true, Sizing: SizeInPixels, SideMin: 64, SideMax: 4096, SideStep: 16, MaxPixels: 4 * Megapixel,
	DefaultWidth: 1024, DefaultHeight: 1024, MaxInputImages: 8, SafetyMax: 5, SafetyMaxEdit: 5, PromptMaxChars: PromptMaxFLUX2,
}

var flux1 = Model{
	Sizing: SizeInPixels, SideMin: 256, SideMax: 1440, SideStep: 32, MaxPixels: 1440 * 1440,
	DefaultWidth: 1024, DefaultHeight: 768, SafetyMax: 6, SafetyMaxEdit: 6, PromptMaxChars: PromptMaxFLUX1,
}

var kontext = Model{
	Sizing: SizeByAspectRatio, DefaultAspectRatio: "1:1", MaxInputImages: 4, SafetyMax: 6, SafetyMaxEdit: 2, PromptMaxChars: PromptMaxFLUX1,
}

func named(m Model, name, title string, change func(*Model)) Model {
	m.Name, m.Title = name, title
	if change != nil {
		change(&m)
	}
	return m
}

// Models are the models, FLUX.2 first.
var Models = []Model{
	named(flux2, "flux-2-pro", "FLUX.2 [pro]", nil),
	named(flux2, "flux-2-max", "FLUX.2 [max]", nil),
	named(flux2, "flux-2-flex", "FLUX.2 [flex]", nil),
	named(flux2, "flux-2-klein-4b", "FLUX.2 [klein] 4B", func(m *Model) { m.MaxInputImages = 4 }),
	named(flux2, "flux-2-klein-9b", "FLUX.2 [klein] 9B", func(m *Model) { m.MaxInputImages = 4 }),
	named(flux1, "flux-pro-1.1", "FLUX1.1 [pro]", nil),
	named(flux1, "flux-pro-1.1-ultra", "FLUX1.1 [pro] Ultra", func(m *Model) {
		m.Sizing, m.DefaultAspectRatio, m.Raw = SizeByAspectRatio, "16:9", true
		m.SideMin, m.SideMax, m.SideStep, m.MaxPixels, m.DefaultWidth, m.DefaultHeight = 0, 0, 0, 0, 0, 0
	}),
	named(flux1, "flux-dev", "FLUX.1 [dev]", nil),
	named(kontext, "flux-kontext-pro", "FLUX.1 Kontext [pro]", nil),
	named(kontext, "flux-kontext-max", "FLUX.1 Kontext [max]", nil),
}

// ModelNamed returns the model called name.
func ModelNamed(name string) (Model, bool) {
	i := slices.IndexFunc(Models, func(m Model) bool { return m.Name == name })
	if i < 0 {
		return Model{}, false
	}
	return Models[i], true
}

// ModelNames lists the models' names; with editing, only those that take input images.
func ModelNames(editing bool) []string {
	var out []string
	for _, m := range Models {
		if !editing || m.MaxInputImages > 0 {
			out = append(out, m.Name)
		}
	}
	return out
}

// ImageRequest is a spend's request, generate_image's or edit_image's: what the agent asks for,
// as the router hashes it, Hubu prices and records it, and Gongbu submits it. Absent optional
// fields take the model's defaults (Model, ResolveSize), which never change what a request
// recorded before means: a recorded request is compared as it was written.
type ImageRequest struct {
	Prompt string `json:"prompt"`
	Model  string `json:"model"`
	// Width and Height (both or neither), for models sized in pixels; 0 is absent.
	Width  int `json:"width,omitempty"`
	Height int `json:"height,omitempty"`
	// AspectRatio, W:H, for models sized by aspect ratio.
	AspectRatio     string  `json:"aspect_ratio,omitempty"`
	Raw             *bool   `json:"raw,omitempty"`
	Seed            *int64  `json:"seed,omitempty"`
	OutputFormat    *string `json:"output_format,omitempty"`
	SafetyTolerance *int    `json:"safety_tolerance,omitempty"`
	// InputImages are edit_image's: the public handles of earlier results of the same agent.
	InputImages []string `json:"input_images,omitempty"`
}

var (
	modelRE       = regexp.MustCompile(ModelPattern)
	aspectRatioRE = regexp.MustCompile(AspectRatioPattern)
)

// ValidModel reports whether m is shaped like a model name.
func ValidModel(m string) bool { return modelRE.MatchString(m) }

// ValidSeed reports whether s is an allowed seed.
func ValidSeed(s int64) bool { return s >= 0 && s <= SeedMax }

// ValidOutputFormat reports whether f is an allowed output format.
func ValidOutputFormat(f string) bool { return f == FormatPNG || f == FormatJPEG }

// Limits are the widest limits any model allows: what the specs and tool schemas state for
// all models at once, and what CheckShape enforces.
type Limits struct {
	PromptMaxChars             int
	SideMin, SideMax, SideStep int // of the models sized in pixels; SideStep divides each one's step
	SafetyMax                  int
	MaxInputImages             int
}

// Widest are the widest limits of Models.
var Widest = widest(Models)

func widest(models []Model) Limits {
	var l Limits
	for _, m := range models {
		l.PromptMaxChars, l.SafetyMax, l.MaxInputImages = max(l.PromptMaxChars, m.PromptMaxChars), max(l.SafetyMax, m.SafetyMax), max(l.MaxInputImages, m.MaxInputImages)
		if m.Sizing != SizeInPixels {
			continue
		}
		if l.SideMin == 0 || m.SideMin < l.SideMin {
			l.SideMin = m.SideMin
		}
		l.SideMax = max(l.SideMax, m.SideMax)
		a, b := l.SideStep, m.SideStep
		for b != 0 {
			a, b = b, a%b
		}
		l.SideStep = a
	}
	return l
}

// CheckShape reports the first way r is not shaped like a request of any model: within the
// widest limits any model allows (Widest). It is what a service checks of a request it may already have
// recorded, which must be compared as it was written, whatever today's models are; Check is
// for a request about to be recorded.
func (r ImageRequest) CheckShape() error {
	w := Widest
	sideOK := func(n int) bool { return n == 0 || (n >= w.SideMin && n <= w.SideMax && n%w.SideStep == 0) }
	switch {
	case !ValidPrompt(r.Prompt, w.PromptMaxChars):
		return fmt.Errorf("prompt must be 1 to %d characters, without NUL", w.PromptMaxChars)
	case !ValidModel(r.Model):
		return errors.New("model is not a model name")
	case !sideOK(r.Width) || !sideOK(r.Height):
		return fmt.Errorf("width and height must be multiples of %d from %d to %d", w.SideStep, w.SideMin, w.SideMax)
	case r.AspectRatio != "" && !aspectRatioRE.MatchString(r.AspectRatio):
		return errors.New("aspect_ratio must be W:H")
	case r.Seed != nil && !ValidSeed(*r.Seed):
		return errors.New("seed must be from 0 to 2^53-1")
	case r.OutputFormat != nil && !ValidOutputFormat(*r.OutputFormat):
		return fmt.Errorf("output_format must be %s or %s", FormatJPEG, FormatPNG)
	case r.SafetyTolerance != nil && (*r.SafetyTolerance < 0 || *r.SafetyTolerance > w.SafetyMax):
		return fmt.Errorf("safety_tolerance must be from 0 to %d", w.SafetyMax)
	case len(r.InputImages) > w.MaxInputImages:
		return fmt.Errorf("input_images must name at most %d earlier results", w.MaxInputImages)
	}
	for _, h := range r.InputImages {
		if !IsPublicHandle(h) {
			return errors.New("input_images must be public handles of earlier results, hubu:public-operation:v1:<uuid>")
		}
	}
	return nil
}

// Check reports the first way r is not a request the model takes, in words an agent can act
// on (each names the argument); editing says it is edit_image's. Input images are checked as
// handles here; whose they are, and their sizes, are Hubu's to check.
func (r ImageRequest) Check(editing bool) error {
	m, ok := ModelNamed(r.Model)
	switch {
	case !ok && editing:
		return fmt.Errorf("model must be one of %s (models that edit)", strings.Join(ModelNames(true), ", "))
	case !ok:
		return fmt.Errorf("model must be one of %s", strings.Join(ModelNames(false), ", "))
	case editing && m.MaxInputImages == 0:
		return fmt.Errorf("model %s does not edit images; edit with %s", m.Name, strings.Join(ModelNames(true), ", "))
	case !ValidPrompt(r.Prompt, m.PromptMaxChars):
		return fmt.Errorf("prompt must be 1 to %d characters for %s, without NUL", m.PromptMaxChars, m.Name)
	}
	if err := r.checkSize(m); err != nil {
		return err
	}
	safetyMax := m.SafetyMax
	if editing {
		safetyMax = m.SafetyMaxEdit
	}
	switch {
	case r.Raw != nil && !m.Raw:
		return fmt.Errorf("raw is for flux-pro-1.1-ultra only, not %s", m.Name)
	case r.Seed != nil && !ValidSeed(*r.Seed):
		return errors.New("seed must be from 0 to 2^53-1")
	case r.OutputFormat != nil && !ValidOutputFormat(*r.OutputFormat):
		return fmt.Errorf("output_format must be %s (the default) or %s", FormatJPEG, FormatPNG)
	case r.SafetyTolerance != nil && (*r.SafetyTolerance < 0 || *r.SafetyTolerance > safetyMax):
		what := ""
		if editing && safetyMax < m.SafetyMax {
			what = " when editing"
		}
		return fmt.Errorf("safety_tolerance must be from 0 (strictest) to %d for %s%s", safetyMax, m.Name, what)
	case !editing && r.InputImages != nil:
		return errors.New("input_images are edit_image's: generate_image makes an image from the prompt alone")
	case editing && (len(r.InputImages) == 0 || len(r.InputImages) > m.MaxInputImages):
		return fmt.Errorf("input_images must name 1 to %d earlier results for %s", m.MaxInputImages, m.Name)
	}
	for i, h := range r.InputImages {
		if !IsPublicHandle(h) {
			return errors.New("input_images must be public handles of earlier results, hubu:public-operation:v1:<uuid>")
		}
		if slices.Contains(r.InputImages[:i], h) {
			return fmt.Errorf("input_images names %s twice", h)
		}
	}
	return nil
}

func (r ImageRequest) checkSize(m Model) error {
	switch {
	case m.Sizing == SizeByAspectRatio && (r.Width != 0 || r.Height != 0):
		return fmt.Errorf("%s takes aspect_ratio, not width and height", m.Name)
	case m.Sizing == SizeByAspectRatio && r.AspectRatio != "" && !ValidAspectRatio(r.AspectRatio):
		return errors.New("aspect_ratio must be W:H between 21:9 and 9:21, such as 16:9")
	case m.Sizing == SizeInPixels && r.AspectRatio != "":
		return fmt.Errorf("%s takes width and height, not aspect_ratio", m.Name)
	case m.Sizing == SizeInPixels && (r.Width == 0) != (r.Height == 0):
		return errors.New("width and height go together: give both or neither")
	case m.Sizing == SizeInPixels && r.Width != 0 && !m.ValidSize(r.Width, r.Height):
		return fmt.Errorf("width and height must be multiples of %d from %d to %d for %s%s", m.SideStep, m.SideMin, m.SideMax, m.Name, m.pixelLimit())
	}
	return nil
}

func (m Model) pixelLimit() string {
	if m.MaxPixels >= m.SideMax*m.SideMax {
		return ""
	}
	return fmt.Sprintf(", at most %d MP (%d pixels) in all", m.MaxPixels/Megapixel, m.MaxPixels)
}

// ValidSize reports whether width x height is a size the model makes.
func (m Model) ValidSize(width, height int) bool {
	side := func(n int) bool { return n >= m.SideMin && n <= m.SideMax && n%m.SideStep == 0 }
	return m.Sizing == SizeInPixels && side(width) && side(height) && width*height <= m.MaxPixels
}

// ValidAspectRatio reports whether s is W:H between 21:9 and 9:21.
func ValidAspectRatio(s string) bool {
	if !aspectRatioRE.MatchString(s) {
		return false
	}
	w, h, _ := strings.Cut(s, ":")
	wn, _ := strconv.Atoi(w)
	hn, _ := strconv.Atoi(h)
	return float64(wn)/float64(hn) <= AspectRatioWidest && float64(hn)/float64(wn) <= AspectRatioWidest
}

// Dimensions are an image's width and height in pixels.
type Dimensions struct{ Width, Height int }

// Pixels is width times height.
func (d Dimensions) Pixels() int64 { return int64(d.Width) * int64(d.Height) }

// ResolveSize is the size a checked request makes, as its scope states it: WxH for a model
// sized in pixels, W:H for one sized by aspect ratio. An edit on a FLUX.2 model that names no
// size makes its first input's size, as BFL does: shrunk to the model's pixel limit if larger
// (keeping its aspect), each side then cut to a multiple of the step.
func (r ImageRequest) ResolveSize(firstInput *Dimensions) (string, error) {
	m, ok := ModelNamed(r.Model)
	if !ok {
		return "", fmt.Errorf("unknown model %q", r.Model)
	}
	switch {
	case m.Sizing == SizeByAspectRatio && r.AspectRatio != "":
		return r.AspectRatio, nil
	case m.Sizing == SizeByAspectRatio:
		return m.DefaultAspectRatio, nil
	case r.Width != 0:
		return fmt.Sprintf("%dx%d", r.Width, r.Height), nil
	case len(r.InputImages) == 0:
		return fmt.Sprintf("%dx%d", m.DefaultWidth, m.DefaultHeight), nil
	case firstInput == nil || firstInput.Width <= 0 || firstInput.Height <= 0:
		return "", errors.New("the size of the first input image is not known")
	}
	w, h := float64(firstInput.Width), float64(firstInput.Height)
	if px := w * h; px > float64(m.MaxPixels) {
		scale := math.Sqrt(float64(m.MaxPixels) / px)
		w, h = w*scale, h*scale
	}
	cut := func(v float64) int { return max(m.SideMin, min(m.SideMax, int(v)/m.SideStep*m.SideStep)) }
	width, height := cut(w), cut(h)
	for width*height > m.MaxPixels { // the clamp to SideMin can only have grown a side that was tiny
		if width >= height {
			width -= m.SideStep
		} else {
			height -= m.SideStep
		}
	}
	return fmt.Sprintf("%dx%d", width, height), nil
}

// ParseSize reads a scope's size: WxH (pixels, ok) or W:H (an aspect ratio, !ok).
func ParseSize(size string) (d Dimensions, pixels bool) {
	w, h, found := strings.Cut(size, "x")
	if !found {
		return Dimensions{}, false
	}
	wn, err1 := strconv.Atoi(w)
	hn, err2 := strconv.Atoi(h)
	if err1 != nil || err2 != nil || wn <= 0 || hn <= 0 {
		return Dimensions{}, false
	}
	return Dimensions{Width: wn, Height: hn}, true
}

// OutputFormatOf is the format a request makes: the one it names, else BFL's default.
func (r ImageRequest) OutputFormatOf() string {
	if r.OutputFormat != nil {
		return *r.OutputFormat
	}
	return FormatDefault
}

// SafetyOf is the safety tolerance a request asks for: the one it names, else BFL's default.
func (r ImageRequest) SafetyOf() int {
	if r.SafetyTolerance != nil {
		return *r.SafetyTolerance
	}
	return SafetyDefault
}
