package httpserver

import (
	"net/http"
	"strconv"

	"github.com/google/uuid"

	"hubu.dev/hubu/kit/httpjson"
	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/services/gongbu"
)

func (s *Server) Execute(w http.ResponseWriter, r *http.Request, params gongbuapi.ExecuteParams) {
	if err := s.requireService(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	var body gongbuapi.ExecutionRequest
	if err := decode(w, r, &body); err != nil {
		s.writeError(w, r, err)
		return
	}
	d, err := decisionOf(body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var signature string
	if params.HubuDecisionSignature != nil {
		signature = *params.HubuDecisionSignature
	}
	exec, created, err := s.Executions.ExecuteSigned(r.Context(), d, signature)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusAccepted
		s.logger().InfoContext(r.Context(), "execution accepted", "decision_id", exec.DecisionID, "public_handle", exec.PublicHandle,
			"state", exec.State)
	}
	httpjson.WriteJSON(w, status, executionOf(exec))
}

func decisionOf(b gongbuapi.ExecutionRequest) (gongbu.Decision, error) {
	if !contract.IsPublicHandle(b.PublicHandle) {
		return gongbu.Decision{}, gongbu.Errorf(gongbu.CodeInvalidArguments, "public_handle must look like hubu:public-operation:v1:<uuid>")
	}
	// The decoder does not apply the schema's required fields and enums; a missing id or an
	// unknown tool is the caller's mistake (400), not a disagreement with Hubu (409).
	switch {
	case b.DecisionId == uuid.Nil || b.AgentId == uuid.Nil:
		return gongbu.Decision{}, gongbu.Errorf(gongbu.CodeInvalidArguments, "decision_id and agent_id are required")
	case !b.Tool.Valid():
		return gongbu.Decision{}, gongbu.Errorf(gongbu.CodeInvalidArguments, "tool must be generate_image or edit_image")
	}
	if err := b.Arguments.CheckShape(); err != nil {
		return gongbu.Decision{}, gongbu.Errorf(gongbu.CodeInvalidArguments, "arguments: %s", err.Error())
	}
	if string(b.Tool) != gongbu.ToolOf(b.Arguments) {
		return gongbu.Decision{}, gongbu.Errorf(gongbu.CodeInvalidArguments, "an edit_image decision names input_images, and only it does")
	}
	d := gongbu.Decision{
		DecisionID: b.DecisionId, PublicHandle: b.PublicHandle, AgentID: b.AgentId, Tool: string(b.Tool),
		Scope:        gongbu.Scope{Provider: b.Scope.Provider, Model: b.Scope.Model, Size: b.Scope.Size},
		Arguments:    b.Arguments,
		AmountMicros: b.AmountMicros, Currency: b.Currency,
	}
	// The scope must describe the arguments; the decision check with Hubu does the rest.
	if !scopeDescribes(d.Scope, d.Arguments) {
		return gongbu.Decision{}, gongbu.Errorf(gongbu.CodeDecisionMismatch, "the scope does not match the arguments")
	}
	return d, nil
}

// scopeDescribes reports whether scope is the model and size that args make: the size they
// name, or (where they name none) a size the model makes, which Hubu resolved from the model's
// defaults or an edit's first input.
func scopeDescribes(scope gongbu.Scope, args gongbu.ImageArguments) bool {
	m, known := contract.ModelNamed(args.Model)
	dims, pixels := contract.ParseSize(scope.Size)
	switch {
	case scope.Model != args.Model:
		return false
	case args.Width != 0:
		return scope.Size == strconv.Itoa(args.Width)+"x"+strconv.Itoa(args.Height)
	case args.AspectRatio != "":
		return scope.Size == args.AspectRatio
	case !known:
		return false
	case m.Sizing == contract.SizeInPixels:
		return pixels && m.ValidSize(dims.Width, dims.Height)
	}
	return contract.ValidAspectRatio(scope.Size)
}
