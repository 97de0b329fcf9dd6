// Package console serves the approval console at /console: operators sign in with their
// token, see the spends held for approval, approve or deny them (each through a
// confirmation page), and look at recent operations, their ledgers and the agents'
// budgets. Pages are rendered on the server with html/template and work without
// JavaScript; a small inline script only refreshes the pending list in place.
//
// Approving and denying call the same store methods as the API (postgres.Store.Approve
// and Deny, under the operator's name), so the console and the API can never disagree.
package console

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/credential"
	"hubu.dev/hubu/services/hubu/postgres"
)

//go:embed templates/*.html
var templateFS embed.FS

// Options configure a Console; nil or zero fields take the defaults.
type Options struct {
	Logger       *slog.Logger
	Now          func() time.Time
	SessionTTL   time.Duration // how long a sign-in lasts; 12h by default
	RefreshEvery time.Duration // how often the pending list refreshes in place; 5s by default
	RecentLimit  int32         // how many recent operations the operations page shows; 50 by default
	// Images, when set, is where the operations page reads the images succeeded operations
	// produced (the executor keeps them); without it the page shows none.
	Images hubu.Images
}

// Console is the approval console's http.Handler. Its paths are absolute (/console/...),
// so it is mounted as is, not under a stripped prefix.
type Console struct {
	store   *postgres.Store
	logger  *slog.Logger
	now     func() time.Time
	ttl     time.Duration
	refresh time.Duration
	recent  int32
	images  hubu.Images
	pages   map[string]*template.Template
	handler http.Handler
}

// New returns the console on store.
func New(store *postgres.Store, opts *Options) *Console {
	if opts == nil {
		opts = &Options{}
	}
	c := &Console{
		store: store, logger: cmp.Or(opts.Logger, slog.New(slog.DiscardHandler)), now: opts.Now, ttl: opts.SessionTTL,
		refresh: opts.RefreshEvery, recent: opts.RecentLimit, images: opts.Images, pages: map[string]*template.Template{},
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.ttl <= 0 {
		c.ttl = 12 * time.Hour
	}
	if c.refresh <= 0 {
		c.refresh = 5 * time.Second
	}
	if c.recent <= 0 {
		c.recent = 50
	}
	for _, name := range []string{"signin.html", "home.html", "confirm.html", "operations.html", "error.html"} {
		c.pages[name] = template.Must(template.ParseFS(templateFS, "templates/layout.html", "templates/approvals.html", "templates/"+name))
	}
	c.pages["fragment"] = template.Must(template.ParseFS(templateFS, "templates/approvals.html"))

	mux := http.NewServeMux()
	mux.HandleFunc("GET /console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, basePath+"/", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /console/{$}", c.signedIn(c.home))
	mux.HandleFunc("GET /console/sign-in", c.signInPage)
	mux.HandleFunc("POST /console/sign-in", c.signIn)
	mux.HandleFunc("POST /console/sign-out", c.signedIn(c.signOut))
	mux.HandleFunc("GET /console/fragments/approvals", c.signedIn(c.fragment))
	mux.HandleFunc("GET /console/approvals/confirm", c.signedIn(c.confirm))
	mux.HandleFunc("POST /console/approvals/approve", c.signedIn(c.approve))
	mux.HandleFunc("POST /console/approvals/deny", c.signedIn(c.deny))
	mux.HandleFunc("GET /console/operations", c.signedIn(c.operations))
	mux.HandleFunc("GET /console/operations/image", c.signedIn(c.image))
	mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		c.errorPage(w, r, http.StatusNotFound, "There is no such page.")
	})

	// Browsers' own signals first (Sec-Fetch-Site, Origin): a cross-origin POST is refused
	// before any form is read. The per-session CSRF token is checked on top of it.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.errorPage(w, r, http.StatusForbidden, "Cross-origin requests are refused.")
	}))
	c.handler = cop.Handler(mux)
	return c
}

// ServeHTTP serves the console with headers that keep its pages out of frames, caches and
// other origins' scripts.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	nonce := randomToken()
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'nonce-"+nonce+"'; style-src 'nonce-"+nonce+"'; "+
		"connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	c.handler.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), nonceKey{}, nonce)))
}

type nonceKey struct{}
type sessionKey struct{}

// signedIn runs next only for a live session whose operator credential is still active;
// anyone else goes to the sign-in page (the fragment answers 401, for its script). A POST
// must also carry the session's CSRF token. A session whose credential was revoked or expired
// is deleted, so it ends on every replica.
func (c *Console) signedIn(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess, ok, err := c.session(r)
		if err != nil {
			c.internal(w, r, "read session", err)
			return
		}
		if ok {
			p, err := c.store.AuthenticateHash(r.Context(), sess.CredentialHash, c.now())
			switch {
			case err != nil && hubu.ErrorCode(err) == hubu.CodeInternal:
				c.internal(w, r, "authenticate session", err)
				return
			case err != nil || p.Role != hubu.RoleOperator || p.Name != sess.Operator || p.CredentialID != sess.CredentialID:
				if err := c.store.DeleteConsoleSession(r.Context(), sess.ID); err != nil {
					c.internal(w, r, "end session", err)
					return
				}
				ok = false
			}
		}
		if !ok {
			setCookie(w, r, sessionCookie, "", basePath, -1)
			if r.URL.Path == basePath+"/fragments/approvals" {
				http.Error(w, "sign in again", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, basePath+"/sign-in", http.StatusSeeOther)
			return
		}
		if r.Method == http.MethodPost {
			if !c.parseForm(w, r) {
				return
			}
			if !sameSecret(r.PostForm.Get("csrf"), sess.CSRF) {
				c.errorPage(w, r, http.StatusForbidden, "The form's security token is missing or wrong. Go back, reload the page and try again.")
				return
			}
		}
		next(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, sess)))
	}
}

// session is the live session the request's cookie names; ok is false when there is none.
func (c *Console) session(r *http.Request) (sess postgres.ConsoleSession, ok bool, err error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return postgres.ConsoleSession{}, false, nil
	}
	sess, err = c.store.ConsoleSession(r.Context(), ck.Value, c.now())
	switch {
	case hubu.ErrorCode(err) == hubu.CodeNotFound:
		return postgres.ConsoleSession{}, false, nil
	case err != nil:
		return postgres.ConsoleSession{}, false, err
	}
	return sess, true, nil
}

func sessionOf(r *http.Request) postgres.ConsoleSession {
	s, _ := r.Context().Value(sessionKey{}).(postgres.ConsoleSession)
	return s
}

// parseForm reads a small url-encoded form; it answers the request itself when it cannot.
func (c *Console) parseForm(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		c.errorPage(w, r, http.StatusBadRequest, "The form could not be read.")
		return false
	}
	return true
}

func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	_, ok, err := c.session(r)
	if err != nil {
		c.internal(w, r, "read session", err)
		return
	}
	if ok {
		http.Redirect(w, r, basePath+"/", http.StatusSeeOther)
		return
	}
	c.renderSignIn(w, r, http.StatusOK, "")
}

// renderSignIn shows the sign-in form with a fresh CSRF token, also set as a cookie: the
// POST must bring both (a login-CSRF guard, before there is a session to hold a token).
func (c *Console) renderSignIn(w http.ResponseWriter, r *http.Request, status int, problem string) {
	token := randomToken()
	setCookie(w, r, signInCookie, token, basePath+"/sign-in", 3600)
	c.render(w, r, status, "signin.html", &page{Title: "Sign in", CSRF: token, Error: problem})
}

func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	if !c.parseForm(w, r) {
		return
	}
	ck, err := r.Cookie(signInCookie)
	if err != nil || !sameSecret(r.PostForm.Get("csrf"), ck.Value) {
		c.renderSignIn(w, r, http.StatusForbidden, "The sign-in form expired. Please try again.")
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	p, err := c.store.Authenticate(r.Context(), token, c.now())
	if err != nil && hubu.ErrorCode(err) == hubu.CodeInternal {
		c.internal(w, r, "authenticate", err)
		return
	}
	if err != nil || p.Role != hubu.RoleOperator {
		// Which of the two it was is not said: the token is not to be probed here.
		c.logger.WarnContext(r.Context(), "console sign-in refused", "remote", r.RemoteAddr)
		c.renderSignIn(w, r, http.StatusUnauthorized, "That is not a valid operator token.")
		return
	}
	// A new sign-in ends the browser's previous session, if it had one.
	if ck, err := r.Cookie(sessionCookie); err == nil && ck.Value != "" {
		if err := c.store.DeleteConsoleSession(r.Context(), ck.Value); err != nil {
			c.internal(w, r, "end the previous session", err)
			return
		}
	}
	now := c.now()
	sess := postgres.ConsoleSession{
		ID: randomToken(), CredentialID: p.CredentialID, Operator: p.Name, CredentialHash: credential.Hash(token),
		CSRF: randomToken(), ExpiresAt: now.Add(c.ttl),
	}
	if err := c.store.CreateConsoleSession(r.Context(), sess, now); err != nil {
		c.internal(w, r, "create session", err)
		return
	}
	setCookie(w, r, signInCookie, "", basePath+"/sign-in", -1)
	setCookie(w, r, sessionCookie, sess.ID, basePath, int(c.ttl/time.Second))
	c.logger.InfoContext(r.Context(), "console sign-in", "operator", p.Name)
	http.Redirect(w, r, basePath+"/", http.StatusSeeOther)
}

func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	sess := sessionOf(r)
	if err := c.store.DeleteConsoleSession(r.Context(), sess.ID); err != nil {
		c.internal(w, r, "end session", err)
		return
	}
	setCookie(w, r, sessionCookie, "", basePath, -1)
	c.logger.InfoContext(r.Context(), "console sign-out", "operator", sess.Operator)
	http.Redirect(w, r, basePath+"/sign-in", http.StatusSeeOther)
}

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

// page is what every template gets; each page uses its own part.
type page struct {
	Title         string
	Nonce         string
	Operator      string // empty when signed out
	CSRF          string
	Flash         string
	Error         string
	RefreshMillis int64
	Approvals     []approvalView
	Action        string
	Op            *approvalView
	Open          bool // the confirmed operation still waits for this decision
	Operations    []operationView
	Budgets       []budgetView
	RecentLimit   int32
}

type approvalView struct {
	Handle, Agent, Model, Size, Amount, Prompt, State, RequestedAt, ExpiresAt string
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

// render executes a page into a buffer first, so a template failure is a clean 500.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, p *page) {
	p.Nonce, _ = r.Context().Value(nonceKey{}).(string)
	if sess, ok := r.Context().Value(sessionKey{}).(postgres.ConsoleSession); ok {
		p.Operator = sess.Operator
		if p.CSRF == "" {
			p.CSRF = sess.CSRF
		}
	}
	var buf bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		c.logger.ErrorContext(r.Context(), "console: render", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func (c *Console) errorPage(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(w, r, status, "error.html", &page{Title: http.StatusText(status), Error: msg})
}

// storeError shows a caller's mistake (not found, conflict) as such; anything else is internal.
func (c *Console) storeError(w http.ResponseWriter, r *http.Request, what string, err error) {
	switch hubu.ErrorCode(err) {
	case hubu.CodeInternal:
		c.internal(w, r, what, err)
	case hubu.CodeNotFound:
		c.errorPage(w, r, http.StatusNotFound, hubu.ErrorMessage(err)+".")
	default:
		c.errorPage(w, r, http.StatusConflict, hubu.ErrorMessage(err)+".")
	}
}

// internal logs an internal error; its details never reach the page.
func (c *Console) internal(w http.ResponseWriter, r *http.Request, what string, err error) {
	if errors.Is(r.Context().Err(), context.Canceled) {
		return
	}
	c.logger.ErrorContext(r.Context(), "console: "+what, "err", err)
	c.errorPage(w, r, http.StatusInternalServerError, "Something went wrong on our side; it has been logged.")
}
