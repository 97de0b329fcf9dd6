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
	ImageURL string `json:"image_url"`
	MIMEType string `json:"mime_type,omitempty"`
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
	image  []byte
	kept   *keptRef // the image Gongbu keeps, which a replay embeds again
	hubu   hubuapi.OperationState
	gongbu *gongbuapi.Execution
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
	if len(a.image) > 0 && a.Result != nil {
		res.Content = append(res.Content, &mcp.ImageContent{Data: a.image, MIMEType: a.Result.MIMEType})
	}
	return res
}

func (a answer) marshal() ([]byte, error) {
	return json.Marshal(stored{ToolResult: a.ToolResult, Kept: a.kept})
}

func unmarshalAnswer(b []byte) (answer, error) {
	var s stored
	if err := json.Unmarshal(b, &s); err != nil {
		return answer{}, err
	}
	return answer{ToolResult: s.ToolResult, image: s.Image, kept: s.Kept}, nil
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
