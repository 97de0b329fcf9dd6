package mcpserver

import "encoding/json"

// Tool names (contract).
const (
	ToolGenerateImage   = "generate_image"
	ToolResumeOperation = "resume_operation"
	ToolOperationStatus = "operation_status"
	ToolCapabilities    = "capabilities"
	ToolGetExecution    = "get_execution"
)

// The input schemas expose no identity field and refuse extra properties: the model says
// what to buy, the harness says which call it is.
var (
	generateImageSchema = json.RawMessage(`{
  "type": "object",
  "additionalProperties": false,
  "required": ["prompt", "model", "width", "height"],
  "properties": {
    "prompt": {"type": "string", "minLength": 1, "maxLength": 4000, "description": "What the image shows."},
    "model": {"type": "string", "description": "A FLUX model from the capabilities tool, e.g. flux-dev."},
    "width": {"type": "integer", "minimum": 256, "maximum": 1440, "multipleOf": 32},
    "height": {"type": "integer", "minimum": 256, "maximum": 1440, "multipleOf": 32},
    "seed": {"type": "integer", "minimum": 0, "maximum": 9007199254740991},
    "output_format": {"type": "string", "enum": ["png", "jpeg"]}
  }
}`)
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
