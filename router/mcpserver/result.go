package mcpserver

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/router/registry"
	"hubu.dev/hubu/router/scrub"
)

// ToolResult is the structured content of every result the router returns.
type ToolResult struct {
	Status       string `json:"status"`
	PublicHandle string `json:"public_handle,omitempty"`
	AmountMicros *int64 `json:"amount_micros,omitempty"`
	Currency     string `json:"currency,omitempty"`
	// ChargedMicros is what the provider charged for a finished execution (0: nothing), in
	// the operation's currency; absent while that is not known yet.
	ChargedMicros *int64       `json:"charged_micros,omitempty"`
	Result        *ImageResult `json:"result,omitempty"`
	Replayed      bool         `json:"replayed"`
	Message       string       `json:"message,omitempty"`
	Error         *ToolError   `json:"error,omitempty"`
	// Details carries read-only tools' payloads (capabilities, status fields).
	Details map[string]any `json:"details,omitempty"`
}

// ImageResult is a generated image.
type ImageResult struct {
	// ImageURL is the provider's link to the image; it expires (BFL's within ten minutes).
	ImageURL string `json:"image_url"`
	MIMEType string `json:"mime_type,omitempty"`
	// ResourceURI names the image Gongbu keeps, in full: read it with resources/read
	// (hubu://images/<public handle>). Absent while Gongbu keeps no image.
	ResourceURI string `json:"resource_uri,omitempty"`
	SizeBytes   int64  `json:"size_bytes,omitempty"`
	Width       int    `json:"width,omitempty"`
	Height      int    `json:"height,omitempty"`
	// Embedded says what the answer's image content is: "original", or "preview" (a scaled
	// JPEG copy of an image larger than the router embeds, described by Preview). Absent when
	// the answer carries no image.
	Embedded string        `json:"embedded,omitempty"`
	Preview  *ImagePreview `json:"preview,omitempty"`
}

// previewMIMEType is every preview's type: Gongbu makes them JPEG.
const previewMIMEType = "image/jpeg"

// ImagePreview describes the embedded preview of a large image.
type ImagePreview struct {
	MIMEType  string `json:"mime_type"`
	SizeBytes int64  `json:"size_bytes"`
	Width     int    `json:"width"`
	Height    int    `json:"height"`
}

// ToolError is a refusal or policy outcome with its stable code.
type ToolError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// answer is a tool result on its way back, with the image bytes to embed and what it rests
// on, for final: the state of Hubu's record and Gongbu's execution, when they were read.
type answer struct {
	ToolResult
	image  *embedded
	kept   *keptRef // the image Gongbu keeps, which a replay embeds again
	hubu   hubuapi.OperationState
	gongbu *gongbuapi.Execution
	// readCapability is Hubu's read capability for the operation, passed on to Gongbu.
	readCapability string
}

// final is the one place that decides whether an answer is the last word on its call, which
// the registry records and replays to every later delivery without touching a backend. It is
// only when nothing about it can change:
//   - Hubu's record says the operation is denied, expired or failed: Hubu settled it.
//   - Gongbu's execution succeeded and Gongbu keeps its image (which every replay embeds from
//     there, whether or not this answer could).
//   - An operator resolved the execution as charged (it has no image and never will) and
//     Hubu settled it as succeeded.
//
// Everything else can change: pending_approval, approved, running, indeterminate; Gongbu's
// failed before Hubu settled it (Hubu still captures what the provider charged, and its own
// failed record, which a redelivery gets, is the last word); a success whose image could not
// be kept by Gongbu (its download is still being tried, or Gongbu predates results by reference:
// the link expires); every error answer
// from Hubu (4xx, 5xx, create_new_operation included: Hubu wrote nothing for the request it
// refused, and the operation the key may already stand for may still go on); and every
// backend that could not be reached. A redelivery of a call without a final answer asks Hubu
// again under the same key; Hubu is idempotent per key, so that never spends twice.
func (a answer) final() bool {
	switch a.hubu {
	case hubuapi.OperationStateDenied, hubuapi.OperationStateExpired, hubuapi.OperationStateFailed:
		return true
	}
	switch e := a.gongbu; {
	case e == nil || e.State != gongbuapi.Succeeded:
		return false
	case e.Result != nil:
		return a.kept != nil
	default:
		return e.ResolvedAt != nil && a.hubu == hubuapi.OperationStateSucceeded
	}
}

// stored is what the registry keeps of a final answer: never the image's bytes, only the
// reference to the image Gongbu keeps. Image is read from rows recorded before results by
// reference, and never written.
type stored struct {
	ToolResult ToolResult `json:"outcome"` // the name recorded rows carry
	Kept       *keptRef   `json:"kept_image,omitempty"`
	Image      []byte     `json:"image,omitempty"`
}

func refusal(code, format string, args ...any) answer {
	msg := fmt.Sprintf(format, args...)
	return answer{ToolResult: ToolResult{Status: "refused", Error: &ToolError{Code: code, Message: msg}, Message: msg}}
}

// toResult builds the MCP result: human-readable text, the structured content, and the
// image as image content when there is one.
func (a answer) toResult() *mcp.CallToolResult {
	a.ToolResult = a.describeImage()
	text := cmp.Or(a.Message, a.Status)
	if a.Error != nil {
		text = a.Error.Code + ": " + a.Error.Message
	}
	if a.PublicHandle != "" {
		text += " (operation " + a.PublicHandle + ")"
	}
	if a.Replayed {
		text += " [replayed: this call was delivered before; nothing new was charged]"
	}
	// Clients that read only text see the structured content too, as the MCP spec advises.
	if sc, err := json.Marshal(a.ToolResult); err == nil {
		text += "\n" + string(sc)
	}
	res := &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: a.ToolResult,
		IsError:           a.Error != nil,
	}
	if a.image != nil && a.Result != nil {
		mimeType := a.Result.MIMEType
		if a.image.preview {
			mimeType = previewMIMEType
		}
		res.Content = append(res.Content, &mcp.ImageContent{Data: a.image.data, MIMEType: mimeType})
	}
	return res
}

// describeImage is the answer's result as it goes out: the kept image's description and
// resource URI, what the answer embeds, and a sentence saying so when it is a preview or
// nothing. The result recorded in the registry is left as it was (Result is a pointer, so it is
// copied): what a replay embeds is decided again when it is replayed.
func (a answer) describeImage() ToolResult {
	tr := a.ToolResult
	if tr.Result == nil {
		return tr
	}
	res := *tr.Result
	tr.Result = &res
	if k := a.kept; k != nil {
		res.ResourceURI = imageURIPrefix + a.PublicHandle
		res.SizeBytes, res.Width, res.Height = k.Size, k.Width, k.Height
	}
	switch {
	case a.image != nil && a.image.preview && a.kept != nil && a.kept.Preview != nil:
		p := a.kept.Preview
		res.Embedded = "preview"
		res.Preview = &ImagePreview{MIMEType: previewMIMEType, SizeBytes: p.Size, Width: p.Width, Height: p.Height}
		tr.Message = fmt.Sprintf("%s; the image (%s) is larger than an answer embeds, so a %dx%d JPEG preview is embedded: "+
			"read the original with resources/read at %s", cmp.Or(tr.Message, tr.Status), sizeOf(a.kept), p.Width, p.Height, res.ResourceURI)
	case a.image != nil:
		res.Embedded = "original"
	case res.ResourceURI != "":
		tr.Message = fmt.Sprintf("%s; the image (%s) is not embedded: read it with resources/read at %s",
			cmp.Or(tr.Message, tr.Status), sizeOf(a.kept), res.ResourceURI)
	}
	return tr
}

// sizeOf says how large a kept image is, for a message.
func sizeOf(k *keptRef) string {
	if k.Width > 0 {
		return fmt.Sprintf("%dx%d, %d bytes", k.Width, k.Height, k.Size)
	}
	return fmt.Sprintf("%d bytes", k.Size)
}

func (a answer) marshal() ([]byte, error) {
	return json.Marshal(stored{ToolResult: a.ToolResult, Kept: a.kept})
}

func unmarshalAnswer(b []byte) (answer, error) {
	var s stored
	if err := json.Unmarshal(b, &s); err != nil {
		return answer{}, err
	}
	a := answer{ToolResult: s.ToolResult, kept: s.Kept}
	if s.Image != nil {
		a.image = &embedded{data: s.Image}
	}
	return a, nil
}

// recordedAnswer is the final answer a registry entry holds. The registry decodes a result it
// keeps in memory once for every redelivery, so the answer's pointers and slices are shared:
// a replay changes only its own copy's fields (Replayed), never what they point to.
func recordedAnswer(e registry.Entry) (answer, error) {
	v, err := e.Decoded(decodeAnswer)
	if err != nil {
		return answer{}, err
	}
	return v.(answer), nil
}

func decodeAnswer(b []byte) (any, error) { return unmarshalAnswer(b) }

// scrubbed removes the private key from every string of the answer.
func (r *Router) scrubbed(ctx context.Context, a answer, key string) answer {
	b, err := json.Marshal(a.ToolResult)
	if err == nil {
		b, err = scrub.JSON(b, append(scrub.Variants(key), scrub.KeysIn(b)...)...)
	}
	var out ToolResult
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		r.cfg.Logger.ErrorContext(ctx, "could not scrub an answer; withholding it", "err", err)
		return refusal(CodeBackendUnavailable, "the answer could not be checked for secrets")
	}
	a.ToolResult = out
	return a
}
