package console

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/services/hubu"
)

func (c *Console) home(w http.ResponseWriter, r *http.Request) {
	approvals, err := c.approvals(r.Context())
	if err != nil {
		c.internal(w, r, "list approvals", err)
		return
	}
	flash, err := c.store.TakeConsoleFlash(r.Context(), sessionOf(r).ID)
	if err != nil {
		c.internal(w, r, "take flash", err)
		return
	}
	c.render(w, r, http.StatusOK, "home.html", &page{
		Title: "Pending approvals", Approvals: approvals, Flash: flash,
		RefreshMillis: c.refresh.Milliseconds(),
	})
}

func (c *Console) fragment(w http.ResponseWriter, r *http.Request) {
	approvals, err := c.approvals(r.Context())
	if err != nil {
		c.internal(w, r, "list approvals", err)
		return
	}
	var buf bytes.Buffer
	if err := c.pages["fragment"].ExecuteTemplate(&buf, "approvals", &page{Approvals: approvals}); err != nil {
		c.internal(w, r, "render fragment", err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

// confirm shows one held operation and the form that approves or denies it.
func (c *Console) confirm(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	action, handle := q.Get("action"), q.Get("handle")
	title, known := map[string]string{"approve": "Approve this spend?", "deny": "Deny this spend?"}[action]
	if !known || !contract.IsPublicHandle(handle) {
		c.errorPage(w, r, http.StatusBadRequest, "Choose an operation to approve or deny from the pending list.")
		return
	}
	op, err := c.store.GetOperation(r.Context(), hubu.Principal{Role: hubu.RoleOperator, Name: sessionOf(r).Operator}, handle, c.now())
	if err != nil {
		c.storeError(w, r, "get operation", err)
		return
	}
	names, err := c.agentNames(r.Context())
	if err != nil {
		c.internal(w, r, "list agents", err)
		return
	}
	v := approvalOf(op, names)
	open := op.State == hubu.StatePendingApproval || (action == "deny" && op.State == hubu.StateApproved)
	c.render(w, r, http.StatusOK, "confirm.html", &page{Title: title, Action: action, Op: &v, Open: open})
}

func (c *Console) approve(w http.ResponseWriter, r *http.Request) {
	handle := r.PostForm.Get("handle")
	if !contract.IsPublicHandle(handle) {
		c.errorPage(w, r, http.StatusBadRequest, "That is not a public handle.")
		return
	}
	op, err := c.store.Approve(r.Context(), sessionOf(r).Operator, handle, c.now())
	c.decided(w, r, "approved", op, err)
}

func (c *Console) deny(w http.ResponseWriter, r *http.Request) {
	handle, reason := r.PostForm.Get("handle"), strings.TrimSpace(r.PostForm.Get("reason"))
	if !contract.IsPublicHandle(handle) {
		c.errorPage(w, r, http.StatusBadRequest, "That is not a public handle.")
		return
	}
	// The API's rule for reasons (httpserver's validReason).
	if utf8.RuneCountInString(reason) > 500 || strings.ContainsRune(reason, 0) {
		c.errorPage(w, r, http.StatusBadRequest, "The reason must be at most 500 characters.")
		return
	}
	op, err := c.store.Deny(r.Context(), sessionOf(r).Operator, handle, reason, c.now())
	c.decided(w, r, "denied", op, err)
}

// decided reports an approval or denial on the next page (post, redirect, get), so a
// reload never sends the form again. The message is kept with the session, in Postgres: the
// next page may come from another replica.
func (c *Console) decided(w http.ResponseWriter, r *http.Request, verb string, op hubu.Operation, err error) {
	sess := sessionOf(r)
	var flash string
	switch {
	case err == nil:
		c.logger.InfoContext(r.Context(), "operation "+verb, "public_handle", op.PublicHandle, "operator", sess.Operator, "via", "console")
		flash = "Operation " + op.PublicHandle + " " + verb + "."
	case hubu.ErrorCode(err) == hubu.CodeInternal:
		c.internal(w, r, "decide", err)
		return
	default:
		flash = "Not " + verb + ": " + hubu.ErrorMessage(err) + "."
	}
	// The decision stands whether or not its message is kept: a lost message is logged, and
	// the pending list shows the outcome all the same.
	if err := c.store.SetConsoleFlash(r.Context(), sess.ID, flash); err != nil {
		c.logger.ErrorContext(r.Context(), "console: set flash", "err", err)
	}
	http.Redirect(w, r, basePath+"/", http.StatusSeeOther)
}

func (c *Console) approvals(ctx context.Context) ([]approvalView, error) {
	ops, err := c.store.ListPendingApprovals(ctx, c.now())
	if err != nil {
		return nil, err
	}
	names, err := c.agentNames(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]approvalView, 0, len(ops))
	for _, op := range ops {
		out = append(out, approvalOf(op, names))
	}
	return out, nil
}

func (c *Console) agentNames(ctx context.Context) (map[string]string, error) {
	agents, err := c.store.ListAgents(ctx)
	if err != nil {
		return nil, err
	}
	names := make(map[string]string, len(agents))
	for _, a := range agents {
		names[a.ID.String()] = a.Name
	}
	return names, nil
}

type approvalView struct {
	Handle, Agent, Model, Size, Amount, Prompt, State, RequestedAt, ExpiresAt string
}

func approvalOf(op hubu.Operation, names map[string]string) approvalView {
	var args hubu.ImageRequest
	_ = json.Unmarshal(op.Arguments, &args) // Hubu stored them validated; a failure leaves the prompt empty
	v := approvalView{
		Handle: op.PublicHandle, Agent: names[op.AgentID.String()], Model: op.Scope.Model, Size: op.Scope.Size,
		Amount: hubu.FormatMoney(op.AmountMicros, op.Currency), Prompt: args.Prompt, State: string(op.State), RequestedAt: stamp(op.CreatedAt),
	}
	if v.Agent == "" {
		v.Agent = op.AgentID.String()
	}
	if op.ApprovalExpiresAt != nil {
		v.ExpiresAt = stamp(*op.ApprovalExpiresAt)
	}
	return v
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }
