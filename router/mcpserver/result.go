package mcpserver

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Outcome is the structured content of every result the router returns.
type Outcome struct {
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

// answer is an outcome on its way back: whether it is final (a redelivery may replay it
// without touching a backend) and the image bytes to embed.
//
// An answer is final only when nothing about it can change: Hubu's record says the
// operation is denied, expired or failed (settled), or Gongbu's execution succeeded and its
// image is embedded, or an operator resolved the execution as charged (it has no image and
// never will) and Hubu settled it. Everything else is not: pending_approval, approved, running,
// indeterminate, Gongbu's failed before Hubu settled it, a success whose image could not be
// embedded (download failed, refused or too large), every error answer from Hubu (4xx, 5xx,
// create_new_operation included) and every backend that could not be reached. A redelivery
// of a call without a final answer asks Hubu again under the same key; Hubu is idempotent
// per key, so asking again never spends twice.
type answer struct {
	Outcome
	final bool
	image []byte
}

// stored is what the registry keeps of a final answer.
type stored struct {
	Outcome Outcome `json:"outcome"`
	Image   []byte  `json:"image,omitempty"`
}

func refusal(code, format string, args ...any) answer {
	msg := fmt.Sprintf(format, args...)
	return answer{Outcome: Outcome{Status: "refused", Error: &ToolError{Code: code, Message: msg}, Message: msg}}
}

// toResult builds the MCP result: human-readable text, the structured outcome, and the
// image as image content when there is one.
func (a answer) toResult() *mcp.CallToolResult {
	text := a.Message
	if text == "" {
		text = a.Status
	}
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
	if sc, err := json.Marshal(a.Outcome); err == nil {
		text += "\n" + string(sc)
	}
	res := &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: a.Outcome,
		IsError:           a.Error != nil,
	}
	if len(a.image) > 0 && a.Result != nil {
		res.Content = append(res.Content, &mcp.ImageContent{Data: a.image, MIMEType: a.Result.MIMEType})
	}
	return res
}

func (a answer) marshal() ([]byte, error) {
	return json.Marshal(stored{Outcome: a.Outcome, Image: a.image})
}

func unmarshalAnswer(b []byte) (answer, error) {
	var s stored
	if err := json.Unmarshal(b, &s); err != nil {
		return answer{}, err
	}
	return answer{Outcome: s.Outcome, final: true, image: s.Image}, nil
}
