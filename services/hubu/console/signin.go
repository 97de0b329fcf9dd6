package console

import (
	"context"
	"net/http"
	"strings"
	"time"

	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/credential"
	"hubu.dev/hubu/services/hubu/postgres"
)

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
