package httpserver

import (
	"encoding/hex"
	"net/http"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/kit/httpjson"
	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/services/gongbu"
)

func (s *Server) ListExecutions(w http.ResponseWriter, r *http.Request) {
	if err := s.requireService(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	all, err := s.Executions.Store.List(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := gongbuapi.ExecutionList{Executions: []gongbuapi.Execution{}}
	for _, e := range all {
		out.Executions = append(out.Executions, executionOf(e))
	}
	httpjson.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) GetExecution(w http.ResponseWriter, r *http.Request, id uuid.UUID) {
	if err := s.requireService(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	exec, err := s.Executions.Get(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, executionOf(exec))
}

// GetOperationExecution serves an agent its own operation's execution. Hubu, asked with the
// agent's token, decides what is the agent's; any other operation is not found. With wait,
// the answer waits for the execution to change (see awaitChange).
func (s *Server) GetOperationExecution(w http.ResponseWriter, r *http.Request, handle string, params gongbuapi.GetOperationExecutionParams) {
	if !contract.IsPublicHandle(handle) {
		s.writeError(w, r, gongbu.Errorf(gongbu.CodeInvalidArguments, "public_handle must look like hubu:public-operation:v1:<uuid>"))
		return
	}
	wait := 0
	if params.Wait != nil {
		wait = *params.Wait
	}
	if wait < 0 || wait > MaxWait {
		s.writeError(w, r, gongbu.Errorf(gongbu.CodeInvalidArguments, "wait must be between 0 and %d seconds", MaxWait))
		return
	}
	if params.State != nil && !params.State.Valid() {
		s.writeError(w, r, gongbu.Errorf(gongbu.CodeInvalidArguments, "state must be one of the execution states"))
		return
	}
	var embed int64
	if params.EmbedImage != nil {
		embed = *params.EmbedImage
	}
	if embed < 0 || embed > gongbu.MaxImageBytes {
		s.writeError(w, r, gongbu.Errorf(gongbu.CodeInvalidArguments, "embed_image must be between 0 and %d bytes", gongbu.MaxImageBytes))
		return
	}
	exec, img, err := s.awaitOwned(r, handle, time.Duration(wait)*time.Second, params.State, embed)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := executionOf(exec)
	embedImage(&out, exec, img, embed)
	httpjson.WriteJSON(w, http.StatusOK, out)
}

// embedImage puts emb, the kept image of a succeeded execution or its preview, read with it,
// into out when it is what an answer that embeds up to limit bytes takes. It is a saving, not
// part of the answer's meaning: an image that was not read with the execution (pruned a moment
// ago) is left out, and the caller fetches it by GetOperationImage as it would without
// embed_image.
func embedImage(out *gongbuapi.Execution, exec gongbu.Execution, emb *gongbu.Embedded, limit int64) {
	if emb == nil || !embeddable(exec, limit) || out.Result == nil || out.Result.Image == nil {
		return
	}
	img := emb.Bytes
	switch kept := exec.Image; {
	case !emb.Preview && len(img) == kept.Size && int64(kept.Size) <= limit:
		out.Result.Image.Data = &img
	case emb.Preview && kept.Preview != nil && len(img) == kept.Preview.Size && out.Result.Image.Preview != nil:
		out.Result.Image.Preview.Data = &img
	}
}

func executionOf(e gongbu.Execution) gongbuapi.Execution {
	out := gongbuapi.Execution{
		DecisionId: e.DecisionID, PublicHandle: e.PublicHandle, AgentId: e.AgentID,
		Scope:        gongbuapi.Scope{Provider: e.Scope.Provider, Model: e.Scope.Model, Size: e.Scope.Size},
		State:        gongbuapi.ExecutionState(e.State),
		AmountMicros: e.AmountMicros, Currency: e.Currency, ProviderJobId: e.ProviderJobID, PollingUrl: e.PollingURL, Error: e.Error,
		ChargedMicros: e.ChargedMicros, ProviderCostMicros: e.ProviderCostMicros, Attempts: e.Attempts, ResolvedAt: e.ResolvedAt, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt,
	}
	reported := e.Reported
	out.Reported = &reported
	if e.ResultURL != nil {
		out.Result = &gongbuapi.ExecutionResult{ImageUrl: *e.ResultURL}
		if i := e.Image; i != nil {
			out.Result.Image = &gongbuapi.KeptImage{MimeType: gongbuapi.KeptImageMimeType(i.MIMEType),
				SizeBytes: int64(i.Size), Sha256: hex.EncodeToString(i.SHA256[:]), Width: positive(i.Width), Height: positive(i.Height)}
			if p := i.Preview; p != nil {
				out.Result.Image.Preview = &gongbuapi.KeptPreview{MimeType: gongbuapi.KeptPreviewMimeTypeImagejpeg, SizeBytes: int64(p.Size),
					Sha256: hex.EncodeToString(p.SHA256[:]), Width: p.Width, Height: p.Height}
			}
		}
	}
	return out
}

// positive is &v, or nil for 0 (a side Gongbu did not record).
func positive(v int) *int {
	if v <= 0 {
		return nil
	}
	return &v
}
