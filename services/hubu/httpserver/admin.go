package httpserver

import (
	"net/http"
	"strings"
	"time"

	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu"
)

func (s *Server) ListAgents(w http.ResponseWriter, r *http.Request) {
	agents, err := s.Store.ListAgents(r.Context())
	s.respond(w, r, http.StatusOK, hubuapi.AgentList{Agents: each(agents, agentOf)}, err)
}

func (s *Server) CreateAgent(w http.ResponseWriter, r *http.Request) {
	var body hubuapi.AgentCreate
	err := decode(w, r, &body, false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !agentNameRE.MatchString(body.Name) {
		s.writeError(w, r, invalid("name must be 1 to 64 of a-z 0-9 . _ - and start with a letter or digit"))
		return
	}
	account := "acct:" + body.Name
	if body.Account != nil {
		account = *body.Account
	}
	if !accountRE.MatchString(account) {
		s.writeError(w, r, invalid("account must be 1 to 128 of A-Z a-z 0-9 . _ : -"))
		return
	}
	pol := hubu.DefaultPolicy()
	if body.Policy != nil {
		if pol, err = policyOf(*body.Policy); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	agent, token, err := s.Store.CreateAgent(r.Context(), body.Name, account, pol, s.Now())
	s.respond(w, r, http.StatusCreated, hubuapi.AgentCreated{Agent: agentOf(agent), Token: token}, err)
}

func (s *Server) GetAgent(w http.ResponseWriter, r *http.Request, id hubuapi.AgentID) {
	a, err := s.Store.GetAgent(r.Context(), id)
	s.respond(w, r, http.StatusOK, agentOf(a), err)
}

func (s *Server) SetAgentPolicy(w http.ResponseWriter, r *http.Request, id hubuapi.AgentID) {
	var body hubuapi.Policy
	err := decode(w, r, &body, false)
	var pol hubu.Policy
	if err == nil {
		pol, err = policyOf(body)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	a, err := s.Store.SetPolicy(r.Context(), id, pol, s.Now())
	s.respond(w, r, http.StatusOK, agentOf(a), err)
}

func (s *Server) SetAgentAccount(w http.ResponseWriter, r *http.Request, id hubuapi.AgentID) {
	var body hubuapi.AccountUpdate
	err := decode(w, r, &body, false)
	if err == nil && !accountRE.MatchString(body.Account) {
		err = invalid("account must be 1 to 128 of A-Z a-z 0-9 . _ : -")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	a, err := s.Store.SetAccount(r.Context(), id, body.Account)
	s.respond(w, r, http.StatusOK, agentOf(a), err)
}

func (s *Server) ListPrices(w http.ResponseWriter, r *http.Request) {
	prices, err := s.Store.ListPrices(r.Context())
	s.respond(w, r, http.StatusOK, hubuapi.PriceList{Prices: each(prices, priceOf)}, err)
}

func (s *Server) SetPrice(w http.ResponseWriter, r *http.Request) {
	var body hubuapi.PriceUpdate
	err := decode(w, r, &body, false)
	var p hubu.Price
	if err == nil {
		p, err = priceUpdateOf(body)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	stored, err := s.Store.SetPrice(r.Context(), p, s.Now())
	s.respond(w, r, http.StatusOK, priceOf(stored), err)
}

func agentOf(a hubu.Agent) hubuapi.Agent {
	return hubuapi.Agent{
		Id: a.ID, Name: a.Name, Account: a.Account, CreatedAt: a.CreatedAt,
		Policy: hubuapi.Policy{
			Currency: a.Policy.Currency, PerOperationCeilingMicros: a.Policy.PerOperationCeilingMicros,
			AutoApproveLimitMicros: a.Policy.AutoApproveLimitMicros, BudgetMicros: a.Policy.BudgetMicros,
			BudgetPeriod: hubuapi.PolicyBudgetPeriod(a.Policy.BudgetPeriod), AllowedProviders: a.Policy.AllowedProviders,
			AllowedModels: a.Policy.AllowedModels,
		},
		OwnerEmail: nonEmpty(a.OwnerEmail),
	}
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// DefaultInviteTTL is how long a sign-in code works when the operator does not say.
const DefaultInviteTTL = 24 * time.Hour

// CreateInvite issues a one-time sign-in code for the agent (shown once).
func (s *Server) CreateInvite(w http.ResponseWriter, r *http.Request, id hubuapi.AgentID) {
	var body hubuapi.InviteCreate
	err := decode(w, r, &body, true)
	ttl := DefaultInviteTTL
	if err == nil && body.TtlSeconds != nil {
		if *body.TtlSeconds < 60 || *body.TtlSeconds > 7*24*3600 {
			err = invalid("ttl_seconds must be between 60 and 604800 (a week)")
		}
		ttl = time.Duration(*body.TtlSeconds) * time.Second
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	code, expires, err := s.Store.CreateInvite(r.Context(), principal(r), id, ttl, s.Now())
	s.respond(w, r, http.StatusCreated, hubuapi.Invite{Code: code, AgentId: id, ExpiresAt: expires}, err)
}

// SetAgentOwner names the person an agent belongs to by their verified email.
func (s *Server) SetAgentOwner(w http.ResponseWriter, r *http.Request, id hubuapi.AgentID) {
	var body hubuapi.OwnerUpdate
	err := decode(w, r, &body, false)
	if err == nil && body.Email != "" && (!strings.Contains(body.Email, "@") || len(body.Email) > 320) {
		err = invalid("email must be an address (or empty to remove the owner)")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.Store.SetAgentOwner(r.Context(), id, body.Email); err != nil {
		s.writeError(w, r, err)
		return
	}
	a, err := s.Store.GetAgent(r.Context(), id)
	s.respond(w, r, http.StatusOK, agentOf(a), err)
}

func priceOf(p hubu.Price) hubuapi.Price {
	out := hubuapi.Price{Provider: p.Provider, Model: p.Model, Size: p.Size, Rule: hubuapi.PriceRule(p.Rule), AmountMicros: p.AmountMicros,
		Currency: p.Currency, UpdatedAt: p.UpdatedAt}
	if p.Rule == hubu.PriceMegapixel {
		out.ExtraMpMicros, out.InputMpMicros = &p.ExtraMPMicros, &p.InputMPMicros
	}
	return out
}
