package console

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/hubu"
)

// The agents pages: every agent, and one agent with the clients its person connected (OAuth
// grants, which are agent credentials), where an operator issues a one-time sign-in code for
// the agent and revokes a grant. Both go through the same store methods as the API
// (postgres.Store.CreateInvite and RevokeCredential), under the operator's credential.

// inviteTTLs are the lifetimes the sign-in code form offers; the API takes any from 1m to 168h.
var inviteTTLs = map[string]time.Duration{"1h": time.Hour, "24h": 24 * time.Hour, "168h": 7 * 24 * time.Hour}

func (c *Console) agents(w http.ResponseWriter, r *http.Request) {
	agents, err := c.store.ListAgents(r.Context())
	if err != nil {
		c.internal(w, r, "list agents", err)
		return
	}
	grants, err := c.grants(r.Context(), nil)
	if err != nil {
		c.internal(w, r, "list credentials", err)
		return
	}
	connected := map[uuid.UUID]int{}
	for _, g := range grants {
		if g.Open {
			connected[g.agentID]++
		}
	}
	p := &page{Title: "Agents"}
	for _, a := range agents {
		v := agentOf(a)
		v.Connected = connected[a.ID]
		p.Agents = append(p.Agents, v)
	}
	c.render(w, r, http.StatusOK, "agents.html", p)
}

// agent shows one agent, its connected clients and the form that issues a sign-in code.
func (c *Console) agent(w http.ResponseWriter, r *http.Request) {
	a, ok := c.agentOf(w, r)
	if !ok {
		return
	}
	grants, err := c.grants(r.Context(), &a.ID)
	if err != nil {
		c.internal(w, r, "list credentials", err)
		return
	}
	flash, err := c.store.TakeConsoleFlash(r.Context(), sessionOf(r).ID)
	if err != nil {
		c.internal(w, r, "take flash", err)
		return
	}
	v := agentOf(a)
	c.render(w, r, http.StatusOK, "agent.html", &page{Title: "Agent " + a.Name, Agent: &v, Grants: grants, Flash: flash})
}

// invite issues a sign-in code and shows it on the answer to the POST itself: unlike a
// decision's message, the code is not kept with the session for a redirect, since Hubu stores
// codes only as hashes. A reload asks to send the form again, and that issues another code.
func (c *Console) invite(w http.ResponseWriter, r *http.Request) {
	a, ok := c.agentOf(w, r)
	if !ok {
		return
	}
	ttl, known := inviteTTLs[r.PostForm.Get("ttl")]
	if !known {
		c.errorPage(w, r, http.StatusBadRequest, "Choose how long the code lasts: 1h, 24h or 168h.")
		return
	}
	sess := sessionOf(r)
	code, expires, err := c.store.CreateInvite(r.Context(), hubu.Principal{Role: hubu.RoleOperator, Name: sess.Operator, CredentialID: sess.CredentialID},
		a.ID, ttl, c.now())
	if err != nil {
		c.storeError(w, r, "create invite", err)
		return
	}
	c.logger.InfoContext(r.Context(), "invite issued", "agent_id", a.ID, "expires_at", expires, "operator", sess.Operator, "via", "console")
	v := agentOf(a)
	c.render(w, r, http.StatusOK, "invite.html", &page{Title: "Sign-in code for " + a.Name, Agent: &v,
		Invite: &inviteView{Code: code, ExpiresAt: stamp(expires)}})
}

// confirmRevoke shows one grant and the form that revokes it.
func (c *Console) confirmRevoke(w http.ResponseWriter, r *http.Request) {
	g, ok := c.grantOf(w, r, r.URL.Query().Get("id"))
	if !ok {
		return
	}
	c.render(w, r, http.StatusOK, "revoke.html", &page{Title: "Revoke this client's access?", Grant: &g})
}

func (c *Console) revoke(w http.ResponseWriter, r *http.Request) {
	g, ok := c.grantOf(w, r, r.PostForm.Get("id"))
	if !ok {
		return
	}
	sess := sessionOf(r)
	who := hubu.Principal{Role: hubu.RoleOperator, Name: sess.Operator, CredentialID: sess.CredentialID}
	flash := g.Client + "'s access as " + g.Agent + " was " + g.State + " already."
	if g.Open {
		cr, err := c.store.RevokeCredential(r.Context(), who, g.credentialID, c.now())
		switch {
		case err == nil:
			c.logger.InfoContext(r.Context(), "credential revoked", "credential_id", cr.ID, "kind", cr.Role, "name", cr.Name,
				"operator", who.Name, "operator_credential_id", who.CredentialID, "via", "console")
			flash = "Revoked " + g.Client + "'s access as " + g.Agent + ": its tokens are refused within seconds."
		case hubu.ErrorCode(err) == hubu.CodeInternal:
			c.internal(w, r, "revoke", err)
			return
		default:
			flash = "Not revoked: " + hubu.ErrorMessage(err) + "."
		}
	}
	// As with a decision: the revocation stands whether or not its message is kept.
	if err := c.store.SetConsoleFlash(r.Context(), sess.ID, flash); err != nil {
		c.logger.ErrorContext(r.Context(), "console: set flash", "err", err)
	}
	http.Redirect(w, r, basePath+"/agents/"+g.AgentID, http.StatusSeeOther)
}

// agentOf is the agent the path names; it answers the request itself when there is none.
func (c *Console) agentOf(w http.ResponseWriter, r *http.Request) (hubu.Agent, bool) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		c.errorPage(w, r, http.StatusNotFound, "There is no such agent.")
		return hubu.Agent{}, false
	}
	a, err := c.store.GetAgent(r.Context(), id)
	if err != nil {
		c.storeError(w, r, "get agent", err)
		return hubu.Agent{}, false
	}
	return a, true
}

// grantOf is the grant id names; it answers the request itself when there is none. Only
// grants are revoked here: other credentials are managed with hubuctl credentials.
func (c *Console) grantOf(w http.ResponseWriter, r *http.Request, id string) (grantView, bool) {
	cid, err := uuid.Parse(id)
	if err != nil {
		c.errorPage(w, r, http.StatusBadRequest, "Choose a connected client to revoke from its agent's page.")
		return grantView{}, false
	}
	grants, err := c.grants(r.Context(), nil)
	if err != nil {
		c.internal(w, r, "list credentials", err)
		return grantView{}, false
	}
	i := slices.IndexFunc(grants, func(g grantView) bool { return g.credentialID == cid })
	if i < 0 {
		c.errorPage(w, r, http.StatusNotFound, "There is no such connected client.")
		return grantView{}, false
	}
	return grants[i], true
}

// grants are the OAuth grants, of one agent when agent is set, newest first.
func (c *Console) grants(ctx context.Context, agent *uuid.UUID) ([]grantView, error) {
	creds, err := c.store.ListCredentials(ctx)
	if err != nil {
		return nil, err
	}
	names, err := c.agentNames(ctx)
	if err != nil {
		return nil, err
	}
	now := c.now()
	var out []grantView
	for _, cr := range creds {
		if cr.ClientID == nil || cr.AgentID == nil || (agent != nil && *cr.AgentID != *agent) {
			continue
		}
		state := cr.StateAt(now)
		g := grantView{
			ID: cr.ID.String(), ClientID: *cr.ClientID, Client: *cr.ClientID, AgentID: cr.AgentID.String(), Agent: names[cr.AgentID.String()],
			Created: stamp(cr.CreatedAt), LastUsed: "never", State: string(state),
			Open:         state == hubu.CredentialActive || state == hubu.CredentialExpiring,
			credentialID: cr.ID, agentID: *cr.AgentID, created: cr.CreatedAt,
		}
		if cr.ClientName != nil && *cr.ClientName != "" {
			g.Client = *cr.ClientName
		}
		if cr.LastUsedAt != nil {
			g.LastUsed = stamp(*cr.LastUsedAt)
		}
		if cr.RevokedAt != nil {
			g.Revoked = stamp(*cr.RevokedAt)
			if cr.RevokedBy != nil {
				g.RevokedBy = cmp.Or(cr.RevokedBy.Name, cr.RevokedBy.ID.String())
			}
		}
		out = append(out, g)
	}
	slices.SortStableFunc(out, func(a, b grantView) int { return b.created.Compare(a.created) })
	return out, nil
}

type agentView struct {
	ID, Name, Account, Email, Budget, AutoApprove, Created string
	Connected                                              int // clients with a valid grant
}

func agentOf(a hubu.Agent) agentView {
	p := a.Policy
	return agentView{
		ID: a.ID.String(), Name: a.Name, Account: a.Account, Email: a.OwnerEmail,
		Budget: hubu.FormatMoney(p.BudgetMicros, p.Currency) + " per " + p.BudgetPeriod, AutoApprove: hubu.FormatMoney(p.AutoApproveLimitMicros, p.Currency),
		Created: stamp(a.CreatedAt),
	}
}

// grantView is an OAuth grant: a client a person allowed to spend as their agent.
type grantView struct {
	ID, Client, ClientID, AgentID, Agent, Created, LastUsed, State, Revoked, RevokedBy string
	Open                                                                               bool // it may be revoked

	credentialID, agentID uuid.UUID
	created               time.Time
}

type inviteView struct{ Code, ExpiresAt string }
