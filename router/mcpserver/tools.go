package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool names (contract).
const (
	ToolGenerateImage   = "generate_image"
	ToolEditImage       = "edit_image"
	ToolResumeOperation = "resume_operation"
	ToolOperationStatus = "operation_status"
	ToolCapabilities    = "capabilities"
	ToolGetExecution    = "get_execution"
)

// tool is one of the router's tools: its declaration and its work, which runs once the
// checks every call goes through (handler) have passed. An identified tool acts for one
// trusted call, so those checks also take the call's identity and hash its request.
type tool struct {
	*mcp.Tool
	identified bool
	run        func(context.Context, toolCall) answer
}

// Server returns an MCP server with the router's tools.
func (r *Router) Server(version string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "hubu-unified-mcp", Version: version}, &mcp.ServerOptions{Logger: r.cfg.Logger})
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true}
	for _, t := range []tool{
		{Tool: &mcp.Tool{
			Name:        ToolGenerateImage,
			Description: "Generate a FLUX image. Paid: Hubu prices it, may hold it for a human's approval, and charges it once however often the call is delivered.",
			InputSchema: generateImageSchema,
		}, identified: true, run: r.spendTool(false)},
		{Tool: &mcp.Tool{
			Name: ToolEditImage,
			Description: "Edit or combine your own earlier FLUX results (FLUX.2 and Kontext), named by their public handles, as the prompt says. " +
				"Paid like generate_image: each input image's megapixels are priced too, and it is charged once however often the call is delivered.",
			InputSchema: editImageSchema,
		}, identified: true, run: r.spendTool(true)},
		{Tool: &mcp.Tool{
			Name:        ToolResumeOperation,
			Description: "Run an operation a human approved, by its public handle. It runs the original request once; resuming again only reports its state.",
			InputSchema: handleSchema,
		}, run: r.byHandle(r.resumeOperation)},
		{Tool: &mcp.Tool{
			Name:        ToolOperationStatus,
			Description: "The state of an operation by its public handle.",
			InputSchema: handleSchema,
			Annotations: readOnly,
		}, run: r.byHandle(r.operationStatus)},
		{Tool: &mcp.Tool{
			Name:        ToolCapabilities,
			Description: "What this agent may do: tools, models and prices, budget left, the approval limit, and the identity sources the router accepts.",
			InputSchema: emptySchema,
			Annotations: readOnly,
		}, run: func(ctx context.Context, c toolCall) answer { return r.scrubbed(ctx, r.capabilities(ctx, c), "") }},
		{Tool: &mcp.Tool{
			Name:        ToolGetExecution,
			Description: "The provider's state and result of an operation's execution, by its public handle.",
			InputSchema: handleSchema,
			Annotations: readOnly,
		}, run: r.byHandle(r.getExecution)},
	} {
		s.AddTool(t.Tool, r.handler(t))
	}
	s.AddResourceTemplate(imageTemplate, r.readImage)
	return s
}

var (
	handleSchema = json.RawMessage(`{
  "type": "object",
  "additionalProperties": false,
  "required": ["public_handle"],
  "properties": {
    "public_handle": {"type": "string", "pattern": "^hubu:public-operation:v1:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
      "description": "The operation's public handle, as an earlier result gave it."}
  }
}`)
	emptySchema = json.RawMessage(`{"type": "object", "additionalProperties": false, "properties": {}}`)
)

// Error codes of tool results (contract).
const (
	CodeIdentityRequired    = "identity_required"
	CodeIdentityAmbiguous   = "identity_ambiguous"
	CodeIdentityInvalid     = "identity_invalid"
	CodeIdentityInArguments = "identity_in_arguments"
	CodeIdentityConflict    = "identity_conflict"
	CodeCallReused          = "call_reused_for_different_request"
	CodeCreateNewOperation  = "create_new_operation"
	CodeApprovalRequired    = "approval_required"
	CodeDenied              = "denied"
	CodeBudgetExceeded      = "budget_exceeded"
	CodeInvalidArguments    = "invalid_arguments"
	CodeNotFound            = "not_found"
	CodeBackendUnavailable  = "backend_unavailable"
)
