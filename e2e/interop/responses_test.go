package interop_test

import (
	"encoding/json"
	"net/http"
	"strings"
)

// responsesFake is the OpenAI Responses API as Codex uses it: POST {base}/responses, streamed.
//
// Codex's quirks, handled here: it lists an MCP server's tools either as functions named
// mcp__<server>__<tool> or inside a tool of type "namespace" named mcp__<server>; a call of a
// namespaced tool names the namespace beside the function.
type responsesFake struct {
	*script
	server string // the MCP server's name in the harness's config
	tool   string
}

func (f *responsesFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
		f.recordUnknown(r.Method + " " + r.URL.Path)
		http.NotFound(w, r)
		return
	}
	var req struct {
		Input []json.RawMessage `json:"input"`
		Tools []struct {
			Type  string `json:"type"`
			Name  string `json:"name"`
			Tools []struct {
				Type string `json:"type"`
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"tools"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	answered := false
	for _, raw := range req.Input {
		var item struct {
			Type   string          `json:"type"`
			CallID string          `json:"call_id"`
			Output json.RawMessage `json:"output"`
		}
		if json.Unmarshal(raw, &item) == nil && item.Type == "function_call_output" {
			f.recordResult(item.CallID, string(item.Output))
			answered = true
		}
	}
	out := startSSE(w)
	respID := newID("resp_", 24)
	out.event("response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": respID}})
	var item map[string]any
	call := (*plannedCall)(nil)
	if !answered {
		call = f.take()
	}
	if call != nil {
		// Where Codex listed the tool decides how the call names it.
		prefix := "mcp__" + f.server
		name, namespace := "", ""
		for _, t := range req.Tools {
			switch {
			case t.Type == "function" && t.Name == prefix+"__"+f.tool:
				name = t.Name
			case t.Type == "namespace" && t.Name == prefix:
				for _, inner := range t.Tools {
					if inner.Name == f.tool {
						name, namespace = inner.Name, t.Name
					}
				}
			}
		}
		if name == "" {
			f.recordUnknown("the request lists no tool " + prefix + "__" + f.tool)
		}
		item = map[string]any{"type": "function_call", "id": newID("fc_", 24), "call_id": call.ID, "name": name,
			"arguments": call.Args, "status": "completed"}
		if namespace != "" {
			item["namespace"] = namespace
		}
	} else {
		item = map[string]any{"type": "message", "id": newID("msg_", 24), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": "Done.", "annotations": []any{}}}}
	}
	out.event("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item})
	out.event("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	out.event("response.completed", map[string]any{"type": "response.completed", "response": map[string]any{
		"id": respID, "status": "completed", "output": []any{item},
		"usage": map[string]any{"input_tokens": 10, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": 5, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 15},
	}})
}
