package console

import (
	"net/http"
	"strconv"

	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/services/hubu"
)

// image serves the image an operation produced, as the executor keeps it: its preview (a
// scaled JPEG copy of a large image) for the operations page, or with full=1 the image itself.
func (c *Console) image(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	handle := q.Get("handle")
	if c.images == nil || !contract.IsPublicHandle(handle) {
		c.errorPage(w, r, http.StatusNotFound, "There is no such image.")
		return
	}
	var (
		img hubu.KeptImage
		err error
	)
	if q.Get("full") != "1" {
		img, err = c.images.Image(r.Context(), handle, true)
	}
	if q.Get("full") == "1" || hubu.ErrorCode(err) == hubu.CodeNotFound {
		img, err = c.images.Image(r.Context(), handle, false) // a small image has no preview: it is its own
	}
	switch {
	case hubu.ErrorCode(err) == hubu.CodeNotFound:
		c.errorPage(w, r, http.StatusNotFound, "The executor keeps no image for this operation.")
		return
	case err != nil:
		c.logger.WarnContext(r.Context(), "console: could not read an image from the executor", "public_handle", handle, "err", err)
		c.errorPage(w, r, http.StatusServiceUnavailable, "The executor could not be asked for the image; try again.")
		return
	}
	w.Header().Set("Content-Type", img.MIMEType)
	w.Header().Set("Content-Length", strconv.Itoa(len(img.Bytes)))
	_, _ = w.Write(img.Bytes)
}

func (c *Console) operations(w http.ResponseWriter, r *http.Request) {
	now := c.now()
	budgets, err := c.store.ListBudgets(r.Context(), now)
	if err != nil {
		c.internal(w, r, "list budgets", err)
		return
	}
	recent, err := c.store.ListRecentOperations(r.Context(), now, c.recent)
	if err != nil {
		c.internal(w, r, "list operations", err)
		return
	}
	names := map[string]string{}
	p := &page{Title: "Operations", RecentLimit: c.recent}
	for _, b := range budgets {
		names[b.Agent.ID.String()] = b.Agent.Name
		p.Budgets = append(p.Budgets, budgetView{
			Agent: b.Agent.Name, Period: b.Budget.Period, PeriodStart: stamp(b.Budget.PeriodStart),
			Limit: hubu.FormatMoney(b.Budget.LimitMicros, b.Budget.Currency), Used: hubu.FormatMoney(b.Budget.UsedMicros, b.Budget.Currency),
			Left: hubu.FormatMoney(b.Budget.RemainingMicros, b.Budget.Currency),
		})
	}
	for _, op := range recent {
		v := operationView{approvalView: approvalOf(op.Operation, names),
			Held: hubu.FormatMoney(op.HeldMicros, op.Currency), Captured: hubu.FormatMoney(op.CapturedMicros, op.Currency),
			Released: hubu.FormatMoney(op.ReleasedMicros, op.Currency),
			Image:    c.images != nil && op.State == hubu.StateSucceeded}
		if op.DecidedBy != nil {
			v.DecidedBy = *op.DecidedBy
		}
		if op.Denial != nil {
			v.Note = op.Denial.Message
		} else if op.FailureReason != nil {
			v.Note = *op.FailureReason
		}
		for _, e := range op.Ledger {
			v.Ledger = append(v.Ledger, ledgerView{Kind: e.Kind, Amount: hubu.FormatMoney(e.AmountMicros, e.Currency), At: stamp(e.CreatedAt)})
		}
		p.Operations = append(p.Operations, v)
	}
	c.render(w, r, http.StatusOK, "operations.html", p)
}

type operationView struct {
	approvalView
	Held, Captured, Released, DecidedBy, Note string
	Ledger                                    []ledgerView
	// Image says the operation succeeded and the page shows what it produced.
	Image bool
}

type ledgerView struct{ Kind, Amount, At string }

type budgetView struct{ Agent, Period, PeriodStart, Limit, Used, Left string }
