package oauth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/credential"
	"hubu.dev/hubu/services/hubu/oauth/upstream"
	"hubu.dev/hubu/services/hubu/postgres"
)

// The sign-in and consent pages: plain HTML forms (no script), each POST carrying a CSRF token
// that is an HMAC of the browser's cookie and the request, so that a page of another site can
// neither sign a person in nor consent for them. Only the browser that opened a request's
// sign-in page may go on with it. No code, token or cookie value is ever logged.

const (
	browserCookie = "hubu_oauth_browser" // random; ties requests and CSRF tokens to one browser
	sessionCookie = "hubu_oauth_session" // random; a browser signed in as an agent
)

var pages = template.Must(template.New("").Parse(`
{{define "head"}}<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>{{.Title}} · Hubu</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;color:#1b1b1b}
input[type=text]{width:100%;padding:.5rem;font:inherit;box-sizing:border-box}button{font:inherit;padding:.5rem 1rem;margin:.5rem .5rem 0 0}
.error{color:#a00000}dt{font-weight:600}dd{margin:0 0 .5rem 0}</style></head><body><h1>{{.Title}}</h1>{{end}}
{{define "signin"}}{{template "head" .}}
<p><b>{{.ClientName}}</b> wants to act for your Hubu agent. Sign in to choose.</p>
{{if .Error}}<p class="error" role="alert">{{.Error}}</p>{{end}}
<form method="post" action="/oauth/signin">
<input type="hidden" name="request" value="{{.Request}}"><input type="hidden" name="csrf" value="{{.CSRF}}">
<label for="code">Sign-in code from your operator</label>
<input type="text" id="code" name="code" autocomplete="one-time-code" autofocus required>
<button type="submit" id="signin">Sign in</button></form>
{{if .Upstream}}<form method="post" action="/oauth/signin/oidc">
<input type="hidden" name="request" value="{{.Request}}"><input type="hidden" name="csrf" value="{{.CSRF}}">
<button type="submit" id="signin-oidc">Sign in with your team's account</button></form>{{end}}
</body></html>{{end}}
{{define "consent"}}{{template "head" .}}
<p><b>{{.ClientName}}</b> asks to spend as your agent through a Hubu router.</p>
<dl><dt>Client</dt><dd>{{.ClientName}} <small>({{.ClientID}})</small></dd>
<dt>It will be sent back to</dt><dd>{{.RedirectHost}}</dd>
<dt>Router</dt><dd>{{.Resource}}</dd>
<dt>Agent</dt><dd>{{.Agent}}</dd>
<dt>Budget</dt><dd>{{.Budget}}</dd></dl>
<p>Every call it makes is charged to this agent. You can disconnect it later; an operator can too.</p>
<form method="post" action="/oauth/consent">
<input type="hidden" name="request" value="{{.Request}}"><input type="hidden" name="csrf" value="{{.CSRF}}">
<button type="submit" name="decision" value="allow" id="allow">Allow</button>
<button type="submit" name="decision" value="deny" id="deny">Deny</button></form>
</body></html>{{end}}
{{define "problem"}}{{template "head" .}}<p class="error" role="alert">{{.Error}}</p>
<p>Start again from your client.</p></body></html>{{end}}
`))

type page struct {
	Title, Error, Request, CSRF, ClientName, ClientID, RedirectHost, Resource, Agent, Budget string
	Upstream                                                                                 bool
}

// render writes a page with headers that keep it out of frames and caches, and that let its
// forms post only to Hubu (and, for consent, redirect on to the client).
func (s *Server) render(w http.ResponseWriter, status int, name string, p page, formTargets string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; form-action 'self'"+formTargets)
	w.WriteHeader(status)
	if err := pages.ExecuteTemplate(w, name, p); err != nil {
		s.log().Error("oauth: render page", "page", name, "err", err)
	}
}

func (s *Server) problem(w http.ResponseWriter, status int, msg string) {
	s.render(w, status, "problem", page{Title: "Cannot sign in", Error: msg}, "")
}

// browser returns the browser's id (its cookie), setting a new one when it has none.
func (s *Server) browser(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(browserCookie); err == nil && len(c.Value) >= 32 {
		return c.Value
	}
	id := randomID()
	http.SetCookie(w, &http.Cookie{Name: browserCookie, Value: id, Path: "/oauth/", HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
	return id
}

func (s *Server) csrf(browser string, request uuid.UUID) string {
	m := hmac.New(sha256.New, s.keys.Crypto[:])
	fmt.Fprintf(m, "csrf\x00%s\x00%s", browser, request)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// pending loads the request a page is for and checks that this browser may go on with it:
// it is the one that opened the sign-in page (the first to, binds it), and the request is
// neither decided nor expired. For a POST it also checks the CSRF token.
func (s *Server) pending(w http.ResponseWriter, r *http.Request) (postgres.AuthRequest, string, bool) {
	id, err := uuid.Parse(r.FormValue("request"))
	if err != nil {
		s.problem(w, http.StatusBadRequest, "This sign-in link is not valid.")
		return postgres.AuthRequest{}, "", false
	}
	req, err := s.store.GetAuthRequest(r.Context(), id)
	if err != nil && hubu.ErrorCode(err) != hubu.CodeNotFound {
		s.log().ErrorContext(r.Context(), "oauth: read authorization request", "err", err)
	}
	if err != nil || !s.now().Before(req.ExpiresAt) {
		s.problem(w, http.StatusNotFound, "This sign-in expired or does not exist.")
		return postgres.AuthRequest{}, "", false
	}
	if req.GrantID != nil || req.Denied {
		s.problem(w, http.StatusConflict, "This sign-in was already decided.")
		return postgres.AuthRequest{}, "", false
	}
	var b string
	if r.Method == http.MethodPost {
		c, err := r.Cookie(browserCookie)
		if err != nil || subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(s.csrf(c.Value, id))) != 1 {
			s.problem(w, http.StatusForbidden, "This form did not come from this browser's sign-in page.")
			return postgres.AuthRequest{}, "", false
		}
		b = c.Value
	} else {
		b = s.browser(w, r)
		if req.BrowserHash == nil {
			if req.BrowserHash, err = s.store.BindAuthRequestBrowser(r.Context(), id, b); err != nil {
				s.problem(w, http.StatusInternalServerError, "Hubu could not start the sign-in; try again.")
				return postgres.AuthRequest{}, "", false
			}
		}
	}
	if req.BrowserHash == nil || subtle.ConstantTimeCompare(req.BrowserHash, credential.Hash(b)) != 1 {
		s.problem(w, http.StatusForbidden, "This sign-in was started in another browser.")
		return postgres.AuthRequest{}, "", false
	}
	return req, b, true
}

// returnTo is where a redirect URI sends the browser back to, as the consent page shows it and as
// a CSP source: the origin of a web or loopback URI, the scheme alone of a private-use one
// (com.example.app:/callback has no host, and "com.example.app://" is not a source CSP accepts).
func returnTo(u *url.URL) string {
	if u.Host == "" {
		return u.Scheme + ":"
	}
	return u.Scheme + "://" + u.Host
}

// sameBrowser lets the callback that hands out the authorization code answer only the browser
// that signed in and consented: anyone else who learns the request's id (it is in URLs) would
// otherwise collect a code for another person's consent. It writes the refusal when not.
func (s *Server) sameBrowser(w http.ResponseWriter, r *http.Request) bool {
	id, err := uuid.Parse(r.URL.Query().Get("id"))
	if err != nil {
		s.problem(w, http.StatusBadRequest, "This sign-in link is not valid.")
		return false
	}
	req, err := s.store.GetAuthRequest(r.Context(), id)
	if err != nil {
		if hubu.ErrorCode(err) != hubu.CodeNotFound {
			s.log().ErrorContext(r.Context(), "oauth: read authorization request", "err", err)
		}
		s.problem(w, http.StatusNotFound, "This sign-in expired or does not exist.")
		return false
	}
	c, err := r.Cookie(browserCookie)
	if err != nil || req.BrowserHash == nil || subtle.ConstantTimeCompare(req.BrowserHash, credential.Hash(c.Value)) != 1 {
		s.problem(w, http.StatusForbidden, "This sign-in was started in another browser.")
		return false
	}
	return true
}

// signIn is the sign-in page (GET) and a sign-in code's submission (POST). A browser already
// signed in goes straight to the consent page.
func (s *Server) signIn(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	req, b, ok := s.pending(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	c, err := s.client(ctx, req.ClientID)
	if err != nil {
		s.problem(w, http.StatusBadRequest, "The client of this sign-in is not known.")
		return
	}
	if r.Method == http.MethodGet {
		if sc, err := r.Cookie(sessionCookie); err == nil {
			if agent, ok, err := s.store.BrowserSession(ctx, sc.Value, s.now()); err == nil && ok {
				s.signedIn(w, r, req, agent)
				return
			}
		}
		s.render(w, http.StatusOK, "signin", page{Title: "Sign in", Request: req.ID.String(), CSRF: s.csrf(b, req.ID),
			ClientName: c.Name, Upstream: s.upstream != nil}, "")
		return
	}
	agent, err := s.store.UseInvite(ctx, r.PostFormValue("code"), s.now())
	if err != nil {
		msg := "Hubu could not check the code; try again."
		if hubu.ErrorCode(err) == hubu.CodeUnauthorized {
			msg = hubu.ErrorMessage(err)
		}
		s.render(w, http.StatusUnauthorized, "signin", page{Title: "Sign in", Request: req.ID.String(), CSRF: s.csrf(b, req.ID),
			ClientName: c.Name, Upstream: s.upstream != nil, Error: msg}, "")
		return
	}
	s.startSession(w, r, agent, "invite")
	s.signedIn(w, r, req, agent)
}

// startSession signs the browser in as the agent for BrowserSessionTTL.
func (s *Server) startSession(w http.ResponseWriter, r *http.Request, agent uuid.UUID, via string) {
	id := randomID()
	if err := s.store.StartBrowserSession(r.Context(), id, agent, via, s.now(), BrowserSessionTTL); err != nil {
		s.log().WarnContext(r.Context(), "oauth: cannot keep a browser session", "err", err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/oauth/", HttpOnly: true, Secure: s.secure,
		SameSite: http.SameSiteLaxMode, MaxAge: int(BrowserSessionTTL / time.Second)})
}

// signedIn records who signed in for the request and sends the browser to the consent page.
func (s *Server) signedIn(w http.ResponseWriter, r *http.Request, req postgres.AuthRequest, agent uuid.UUID) {
	if err := s.store.SignInAuthRequest(r.Context(), req.ID, agent); err != nil {
		s.problem(w, http.StatusConflict, "This sign-in was already decided.")
		return
	}
	http.Redirect(w, r, consentPath+"?request="+req.ID.String(), http.StatusSeeOther)
}

// consent shows what the person is allowing (GET) and takes their decision (POST).
func (s *Server) consent(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	req, b, ok := s.pending(w, r)
	if !ok {
		return
	}
	if req.AgentID == nil {
		http.Redirect(w, r, signInPath+"?request="+req.ID.String(), http.StatusSeeOther)
		return
	}
	ctx := r.Context()
	c, err := s.client(ctx, req.ClientID)
	if err != nil {
		s.problem(w, http.StatusBadRequest, "The client of this sign-in is not known.")
		return
	}
	redirect, _ := url.Parse(req.RedirectUri)
	target := returnTo(redirect)
	if r.Method == http.MethodGet {
		agent, err := s.store.GetAgent(ctx, *req.AgentID)
		if err != nil {
			s.problem(w, http.StatusInternalServerError, "Hubu could not read the agent; try again.")
			return
		}
		s.render(w, http.StatusOK, "consent", page{
			Title: "Allow " + c.Name + "?", Request: req.ID.String(), CSRF: s.csrf(b, req.ID), ClientName: c.Name, ClientID: c.ID,
			RedirectHost: target, Resource: req.Resource, Agent: agent.Name, Budget: budget(agent),
		}, " "+target)
		return
	}
	switch r.PostFormValue("decision") {
	case "allow":
		if _, err := s.store.AllowAuthRequest(ctx, req, c.Name, s.now()); err != nil {
			s.problem(w, http.StatusConflict, "This sign-in was already decided.")
			return
		}
		http.Redirect(w, r, s.issuer+callbackPath+"?id="+req.ID.String(), http.StatusSeeOther)
	case "deny":
		if err := s.store.DenyAuthRequest(ctx, req.ID); err != nil {
			s.problem(w, http.StatusConflict, "This sign-in was already decided.")
			return
		}
		q := url.Values{"error": {"access_denied"}, "error_description": {"the person denied the request"}, "iss": {s.issuer}}
		if req.State != "" {
			q.Set("state", req.State)
		}
		sep := "?"
		if redirect.RawQuery != "" {
			sep = "&"
		}
		http.Redirect(w, r, req.RedirectUri+sep+q.Encode(), http.StatusSeeOther)
	default:
		s.problem(w, http.StatusBadRequest, "Choose Allow or Deny.")
	}
}

// budget says an agent's budget in words.
func budget(a hubu.Agent) string {
	p := a.Policy
	return fmt.Sprintf("%s per %s; at most %s per operation (%s)", micros(p.BudgetMicros), p.BudgetPeriod,
		micros(p.PerOperationCeilingMicros), p.Currency)
}

func micros(m int64) string { return fmt.Sprintf("%d.%02d", m/1_000_000, (m%1_000_000)/10_000) }

// signInUpstream sends the person to the team's OpenID Connect provider.
func (s *Server) signInUpstream(w http.ResponseWriter, r *http.Request) {
	if s.upstream == nil {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	req, _, ok := s.pending(w, r)
	if !ok {
		return
	}
	authURL, p := s.upstream.Begin()
	if err := s.store.SetAuthRequestUpstream(r.Context(), req.ID, p.State, p.Nonce, p.Verifier); err != nil {
		s.problem(w, http.StatusInternalServerError, "Hubu could not start the sign-in; try again.")
		return
	}
	// The provider comes back with its state only: a cookie says which request it is for.
	http.SetCookie(w, &http.Cookie{Name: "hubu_oauth_upstream", Value: req.ID.String(), Path: oidcReturnPath, HttpOnly: true,
		Secure: s.secure, SameSite: http.SameSiteLaxMode, MaxAge: int(AuthRequestTTL / time.Second)})
	http.Redirect(w, r, authURL, http.StatusSeeOther)
}

// upstreamReturn is where the provider sends the person back: their verified email names
// their agent.
func (s *Server) upstreamReturn(w http.ResponseWriter, r *http.Request) {
	if s.upstream == nil {
		http.NotFound(w, r)
		return
	}
	c, err := r.Cookie("hubu_oauth_upstream")
	if err != nil {
		s.problem(w, http.StatusBadRequest, "This browser did not start a sign-in with the team's account.")
		return
	}
	q := r.URL.Query()
	q.Set("request", c.Value)
	r.Form = q
	req, _, ok := s.pending(w, r)
	if !ok {
		return
	}
	if req.UpstreamState == nil || req.UpstreamNonce == nil || req.UpstreamVerifier == nil {
		s.problem(w, http.StatusBadRequest, "This sign-in did not go through the team's account.")
		return
	}
	ctx := r.Context()
	id, err := s.upstream.Finish(ctx, upstream.Pending{State: *req.UpstreamState, Nonce: *req.UpstreamNonce, Verifier: *req.UpstreamVerifier}, r.URL.Query())
	// A callback with this sign-in's state spent it, whatever came of it; one with another
	// state is not this sign-in's, and leaves it pending.
	if err != nil && !errors.Is(err, upstream.ErrStateMismatch) {
		if cerr := s.store.ClearAuthRequestUpstream(ctx, req.ID); cerr != nil {
			s.log().WarnContext(ctx, "oauth: cannot forget a failed sign-in at the provider", "err", cerr)
		}
	}
	var perr *upstream.ProviderError
	switch {
	case errors.Is(err, upstream.ErrEmailNotVerified):
		s.problem(w, http.StatusForbidden, "Your team's account has no verified email: verify it there, or ask an operator for a sign-in code.")
		return
	case errors.As(err, &perr):
		s.problem(w, http.StatusForbidden, "Your team's sign-in was refused ("+perr.Code+").")
		return
	case errors.Is(err, upstream.ErrStateMismatch):
		// A forged or stale callback (another tab's sign-in): the browser's doing, not the
		// provider's failure, so not logged.
		s.problem(w, http.StatusBadRequest, "This answer from your team's account is not for this browser's sign-in.")
		return
	case err != nil:
		s.log().WarnContext(ctx, "oauth: sign-in through the team's provider failed", "err", err)
		s.problem(w, http.StatusBadGateway, "Hubu could not complete the sign-in with your team's account.")
		return
	}
	agent, err := s.store.AgentByOwnerEmail(ctx, id.Email)
	if err != nil && hubu.ErrorCode(err) != hubu.CodeNotFound {
		s.log().ErrorContext(ctx, "oauth: look up the agent of a signed-in person", "err", err)
		s.problem(w, http.StatusInternalServerError, "Hubu could not look up your agent; try again.")
		return
	}
	if err != nil {
		s.problem(w, http.StatusForbidden, "No Hubu agent belongs to "+id.Email+": ask an operator to name you as an agent's owner.")
		return
	}
	s.startSession(w, r, agent, "oidc")
	s.signedIn(w, r, req, agent)
}

func randomID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
