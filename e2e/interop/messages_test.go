package interop_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"strings"
)

// messagesFake is the Anthropic Messages API as Claude Code uses it: POST {base}/v1/messages,
// streamed.
//
// Claude Code's quirks, handled here: it sends side requests (a title, a quota probe) beside
// the conversation, which get a short text; and it may defer MCP tools behind its tool search,
// listing only their names: then the fake first calls ToolSearch with "select:<tool>", as a
// model would, and calls the tool once the search has loaded it.
type messagesFake struct {
	*script
	tool string // the tool's name as Claude Code lists it: mcp__<server>__<tool>
}

const toolSearch = "ToolSearch"

func (f *messagesFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/v1/messages/count_tokens"):
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"input_tokens":10}`))
		return
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/v1/messages"):
	default:
		f.recordUnknown(r.Method + " " + r.URL.Path)
		http.NotFound(w, r)
		return
	}
	var req struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name         string `json:"name"`
			DeferLoading bool   `json:"defer_loading"`
		} `json:"tools"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// What the conversation has done so far: which tools it called and what came back.
	calledTool := map[string]string{} // tool_use id -> tool name
	searched, answered := false, false
	for _, m := range req.Messages {
		var blocks []struct {
			Type      string          `json:"type"`
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue // a plain string
		}
		for _, b := range blocks {
			switch b.Type {
			case "tool_use":
				calledTool[b.ID] = b.Name
			case "tool_result":
				switch calledTool[b.ToolUseID] {
				case toolSearch:
					searched = true
				case f.tool:
					f.recordResult(b.ToolUseID, string(b.Content))
					answered = true
				}
			}
		}
	}
	listed, deferred, canSearch := false, true, false
	for _, t := range req.Tools {
		switch t.Name {
		case f.tool:
			listed, deferred = true, t.DeferLoading
		case toolSearch:
			canSearch = true
		}
	}
	// The block to answer with: a text, a tool search, or the planned call.
	block := map[string]any{"type": "text", "text": "Done."}
	var input string
	switch {
	case answered || (!listed && !canSearch):
		// The turn is over, or a side request: text.
	case (listed && !deferred) || searched:
		if call := f.take(); call != nil {
			block = map[string]any{"type": "tool_use", "id": call.ID, "name": f.tool, "input": map[string]any{}}
			input = call.Args
		}
	default:
		f.mu.Lock()
		f.searches++
		f.mu.Unlock()
		block = map[string]any{"type": "tool_use", "id": newID("toolu_", 24), "name": toolSearch, "input": map[string]any{}}
		input = `{"query":"select:` + f.tool + `"}`
	}
	stop := "end_turn"
	if block["type"] == "tool_use" {
		stop = "tool_use"
	}
	msg := map[string]any{"id": newID("msg_", 24), "type": "message", "role": "assistant", "model": req.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 1}}
	if !req.Stream {
		if input != "" {
			block["input"] = json.RawMessage(input)
		}
		msg["content"], msg["stop_reason"] = []any{block}, stop
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(msg)
		return
	}
	out := startSSE(w)
	out.event("message_start", map[string]any{"type": "message_start", "message": msg})
	start := maps.Clone(block)
	if block["type"] == "text" {
		start["text"] = ""
	}
	out.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": start})
	if block["type"] == "text" {
		out.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": block["text"]}})
	} else {
		out.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": input}})
	}
	out.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	out.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}})
	out.event("message_stop", map[string]any{"type": "message_stop"})
}
