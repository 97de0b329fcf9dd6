// Package console serves the approval console at /console: operators sign in with their
// token, see the spends held for approval, approve or deny them (each through a
// confirmation page), look at recent operations, their ledgers and the agents'
// budgets, issue one-time sign-in codes for agents and revoke the clients connected as
// them (OAuth grants). Pages are rendered on the server with html/template and work
// without JavaScript; a small inline script only refreshes the pending list in place.
//
// Approving and denying call the same store methods as the API (postgres.Store.Approve
// and Deny, under the operator's name), so the console and the API can never disagree;
// so do issuing a code and revoking a grant (CreateInvite, RevokeCredential).
package console

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"time"

	"hubu.dev/hubu/services/hubu"
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
	for _, name := range []string{"signin.html", "home.html", "confirm.html", "operations.html", "error.html",
		"agents.html", "agent.html", "invite.html", "revoke.html"} {
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
	mux.HandleFunc("GET /console/agents", c.signedIn(c.agents))
	mux.HandleFunc("GET /console/agents/{id}", c.signedIn(c.agent))
	mux.HandleFunc("POST /console/agents/{id}/invite", c.signedIn(c.invite))
	mux.HandleFunc("GET /console/grants/confirm", c.signedIn(c.confirmRevoke))
	mux.HandleFunc("POST /console/grants/revoke", c.signedIn(c.revoke))
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

// parseForm reads a small url-encoded form; it answers the request itself when it cannot.
func (c *Console) parseForm(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		c.errorPage(w, r, http.StatusBadRequest, "The form could not be read.")
		return false
	}
	return true
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
	Agents        []agentView
	Agent         *agentView
	Grants        []grantView
	Grant         *grantView // the one to revoke
	Invite        *inviteView
}

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
