package httpserver

import (
	"encoding/base64"
	"net/http"

	"hubu.dev/hubu/proto/decisionsig"

	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu/postgres"
)

func (s *Server) GetDecision(w http.ResponseWriter, r *http.Request, id hubuapi.DecisionID) {
	op, err := s.Store.GetDecision(r.Context(), id)
	o := operationOf(op)
	s.respond(w, r, http.StatusOK, hubuapi.Decision{
		DecisionId: id, PublicHandle: o.PublicHandle, AgentId: o.AgentId, Tool: o.Tool, Scope: o.Scope,
		Arguments: o.Arguments, AmountMicros: o.AmountMicros, Currency: o.Currency, State: o.State,
		IssuedAt: op.DecisionIssuedAt, DispatchAttempts: op.DispatchAttempts,
	}, err)
}

// ListDecisionKeys gives the executor the public keys that Hubu signs decisions with.
func (s *Server) ListDecisionKeys(w http.ResponseWriter, r *http.Request) {
	keys, err := s.Store.DecisionKeys(r.Context(), s.Now())
	s.respond(w, r, http.StatusOK, hubuapi.DecisionKeyList{Keys: each(keys, func(k decisionsig.Key) hubuapi.DecisionKey {
		return hubuapi.DecisionKey{Kid: k.ID, Alg: hubuapi.Ed25519, PublicKey: base64.RawURLEncoding.EncodeToString(k.Public)}
	})}, err)
}

func (s *Server) ListDecisions(w http.ResponseWriter, r *http.Request) {
	ds, err := s.Store.ListDecisions(r.Context())
	s.respond(w, r, http.StatusOK, hubuapi.DecisionList{Decisions: each(ds, func(d postgres.DecisionSummary) hubuapi.DecisionSummary {
		return hubuapi.DecisionSummary{
			DecisionId: d.DecisionID, PublicHandle: d.PublicHandle, State: hubuapi.OperationState(d.State),
			AmountMicros: d.AmountMicros, Currency: d.Currency, HeldMicros: d.HeldMicros,
			CapturedMicros: d.CapturedMicros, ReleasedMicros: d.ReleasedMicros,
			ProviderCostMicros: d.ProviderCostMicros, CreatedAt: d.CreatedAt,
		}
	})}, err)
}

func (s *Server) SettleDecision(w http.ResponseWriter, r *http.Request, id hubuapi.DecisionID) {
	var body hubuapi.SettleRequest
	err := decode(w, r, &body, false)
	if err == nil {
		err = validReason(body.Reason)
	}
	failed := body.Failed != nil && *body.Failed
	if err == nil && body.Reason != nil && !failed {
		err = invalid("reason goes only with failed: true")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	op, err := s.Store.Settle(r.Context(), id, body.AmountMicros, failed, reasonOf(body.Reason), body.ProviderCostMicros, s.Now())
	s.respond(w, r, http.StatusOK, operationOf(op), err)
}

func (s *Server) ReleaseDecision(w http.ResponseWriter, r *http.Request, id hubuapi.DecisionID) {
	var body hubuapi.ReleaseRequest
	err := decode(w, r, &body, true)
	if err == nil {
		err = validReason(body.Reason)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	op, err := s.Store.Release(r.Context(), id, reasonOf(body.Reason), s.Now())
	s.respond(w, r, http.StatusOK, operationOf(op), err)
}
