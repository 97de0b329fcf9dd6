package httpserver

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/proto/decisionsig"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu"
)

func (s *Server) Authorize(w http.ResponseWriter, r *http.Request) {
	var body hubuapi.AuthorizeRequest
	if err := decode(w, r, &body, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	req, err := authorizeRequestOf(body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	op, replayed, err := s.Lifecycle.Authorize(r.Context(), principal(r).AgentID, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.grantRead(w, r, op)
	status := http.StatusCreated
	w.Header().Set("Idempotent-Replayed", "false")
	if replayed {
		status = http.StatusOK
		w.Header().Set("Idempotent-Replayed", "true")
	} else {
		s.metrics.decisions.WithLabelValues(string(op.State)).Inc()
	}
	writeJSON(w, status, operationOf(op))
}

func (s *Server) GetCapabilities(w http.ResponseWriter, r *http.Request) {
	c, err := s.Store.Capabilities(r.Context(), principal(r).AgentID, s.Now())
	s.respond(w, r, http.StatusOK, hubuapi.Capabilities{
		AgentId: c.Agent.ID, AgentName: c.Agent.Name, Account: c.Agent.Account,
		Tools:                     []hubuapi.Tool{hubuapi.GenerateImage},
		Prices:                    each(c.Prices, priceOf),
		AutoApproveLimitMicros:    c.Agent.Policy.AutoApproveLimitMicros,
		PerOperationCeilingMicros: c.Agent.Policy.PerOperationCeilingMicros,
		Budget: hubuapi.Budget{
			Period: hubuapi.BudgetPeriod(c.Budget.Period), PeriodStart: c.Budget.PeriodStart, LimitMicros: c.Budget.LimitMicros,
			UsedMicros: c.Budget.UsedMicros, RemainingMicros: c.Budget.RemainingMicros, Currency: c.Budget.Currency,
		},
	}, err)
}

func (s *Server) GetOperation(w http.ResponseWriter, r *http.Request, handle hubuapi.PublicHandle) {
	if err := validateHandle(handle); err != nil {
		s.writeError(w, r, err)
		return
	}
	op, err := s.Store.GetOperation(r.Context(), principal(r), handle, s.Now())
	s.respond(w, r, http.StatusOK, operationOf(op), err)
}

// GetOperationImage serves an operation's image from the executor, to whoever may read the
// operation: its agent, or an operator.
func (s *Server) GetOperationImage(w http.ResponseWriter, r *http.Request, handle hubuapi.PublicHandle, params hubuapi.GetOperationImageParams) {
	if err := validateHandle(handle); err != nil {
		s.writeError(w, r, err)
		return
	}
	if _, err := s.Store.GetOperation(r.Context(), principal(r), handle, s.Now()); err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.Images == nil {
		s.writeError(w, r, hubu.Errorf(hubu.CodeUnavailable, "this Hubu has no executor to read images from"))
		return
	}
	img, err := s.Images.Image(r.Context(), handle, params.Preview != nil && *params.Preview)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", img.MIMEType)
	if img.ETag != "" {
		h.Set("ETag", img.ETag)
	}
	h.Set("Cache-Control", "private, max-age=86400, immutable")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(img.Bytes)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(img.Bytes)
}

func (s *Server) ResumeOperation(w http.ResponseWriter, r *http.Request, handle hubuapi.PublicHandle) {
	if err := validateHandle(handle); err != nil {
		s.writeError(w, r, err)
		return
	}
	op, err := s.Lifecycle.Resume(r.Context(), principal(r), handle)
	if err == nil {
		s.grantRead(w, r, op)
	}
	s.respond(w, r, http.StatusOK, operationOf(op), err)
}

func (s *Server) GetOperationLedger(w http.ResponseWriter, r *http.Request, handle hubuapi.PublicHandle) {
	if err := validateHandle(handle); err != nil {
		s.writeError(w, r, err)
		return
	}
	op, entries, err := s.Store.Ledger(r.Context(), principal(r), handle, s.Now())
	s.respond(w, r, http.StatusOK, hubuapi.Ledger{
		PublicHandle: op.PublicHandle, State: hubuapi.OperationState(op.State),
		AmountMicros: op.AmountMicros, Currency: op.Currency, ProviderCostMicros: op.ProviderCostMicros,
		HeldMicros: op.HeldMicros, CapturedMicros: op.CapturedMicros, ReleasedMicros: op.ReleasedMicros,
		Entries: each(entries, func(e hubu.LedgerEntry) hubuapi.LedgerEntry {
			return hubuapi.LedgerEntry{Id: e.ID, Kind: hubuapi.LedgerEntryKind(e.Kind), AmountMicros: e.AmountMicros, Currency: e.Currency, CreatedAt: e.CreatedAt}
		}),
	}, err)
}

func (s *Server) ApproveOperation(w http.ResponseWriter, r *http.Request, handle hubuapi.PublicHandle) {
	if err := validateHandle(handle); err != nil {
		s.writeError(w, r, err)
		return
	}
	who := principal(r)
	op, err := s.Store.Approve(r.Context(), who.Name, handle, s.Now())
	if err == nil {
		s.logger().InfoContext(r.Context(), "operation approved", "public_handle", op.PublicHandle, "operator", who.Name)
	}
	s.respond(w, r, http.StatusOK, operationOf(op), err)
}

func (s *Server) DenyOperation(w http.ResponseWriter, r *http.Request, handle hubuapi.PublicHandle) {
	err := validateHandle(handle)
	var body hubuapi.DenyRequest
	if err == nil {
		err = decode(w, r, &body, true)
	}
	if err == nil {
		err = validReason(body.Reason)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	who := principal(r)
	op, err := s.Store.Deny(r.Context(), who.Name, handle, reasonOf(body.Reason), s.Now())
	if err == nil {
		s.logger().InfoContext(r.Context(), "operation denied", "public_handle", op.PublicHandle, "operator", who.Name)
	}
	s.respond(w, r, http.StatusOK, operationOf(op), err)
}

func (s *Server) ListApprovals(w http.ResponseWriter, r *http.Request) {
	ops, err := s.Store.ListPendingApprovals(r.Context(), s.Now())
	s.respond(w, r, http.StatusOK, hubuapi.OperationList{Operations: each(ops, operationOf)}, err)
}

func operationOf(op hubu.Operation) hubuapi.Operation {
	out := hubuapi.Operation{
		PublicHandle: op.PublicHandle, AgentId: op.AgentID, Tool: hubuapi.Tool(op.Tool), State: hubuapi.OperationState(op.State),
		AmountMicros: op.AmountMicros, Currency: op.Currency, Account: op.Account,
		Scope:       hubuapi.Scope{Provider: op.Scope.Provider, Model: op.Scope.Model, Size: op.Scope.Size},
		RequestHash: op.RequestHash, DecisionId: op.DecisionID, ApprovalExpiresAt: op.ApprovalExpiresAt, DecidedBy: op.DecidedBy,
		FailureReason: op.FailureReason, ProviderCostMicros: op.ProviderCostMicros,
		HeldMicros: op.HeldMicros, CapturedMicros: op.CapturedMicros, ReleasedMicros: op.ReleasedMicros,
		CreatedAt: op.CreatedAt, UpdatedAt: op.UpdatedAt,
	}
	_ = json.Unmarshal(op.Arguments, &out.Arguments) // written by Hubu from a validated request
	if op.Denial != nil {
		out.Denial = &hubuapi.Denial{Code: hubuapi.DenialCode(op.Denial.Code), Message: op.Denial.Message}
	}
	return out
}

// ReadCapabilityTTL is how long a read capability lets Gongbu answer the router's long-polls
// on an operation without asking Hubu: about as long as the router waits for a spend's image.
// Past it Gongbu asks Hubu again, so a credential revoked meanwhile loses even the operations
// it started within this time.
const ReadCapabilityTTL = 2 * time.Minute

// grantRead sets the read capability for op on an agent's answer (see Server.DecisionKey),
// bound to the request's own bearer token and grant.
func (s *Server) grantRead(w http.ResponseWriter, r *http.Request, op hubu.Operation) {
	p := principal(r)
	if s.DecisionKey == nil || p.Role != hubu.RoleAgent || p.AgentID != op.AgentID {
		return
	}
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	c, err := decisionsig.SignRead(s.DecisionKey, decisionsig.ReadClaims{
		PublicHandle: op.PublicHandle, Credential: decisionsig.CredentialHash(token), Grant: r.Header.Get(contract.GrantHeader),
		Audience: decisionsig.Audience, ExpiresAt: s.Now().Add(ReadCapabilityTTL),
	})
	if err != nil {
		s.Logger.ErrorContext(r.Context(), "cannot sign a read capability", "err", err)
		return
	}
	w.Header().Set(decisionsig.ReadHeader, c)
}
