package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"sync"
	"time"
)

// Cookie names. The session cookie holds only a random session id: never the token.
const (
	sessionCookie = "hubu_console"
	signInCookie  = "hubu_console_signin" // the sign-in form's CSRF token, before there is a session
	basePath      = "/console"
)

// session is one signed-in operator. Sessions live in this process's memory only: a
// restart signs everyone out, which costs a sign-in and nothing else.
type session struct {
	id       string
	operator string
	credHash []byte // the hash of the operator's token, to notice a revoked credential
	csrf     string
	expires  time.Time
	flash    string // a one-time message for the next page
}

type sessionStore struct {
	mu   sync.Mutex
	byID map[string]*session
}

func (s *sessionStore) create(operator string, credHash []byte, now time.Time, ttl time.Duration) *session {
	sess := &session{id: randomToken(), operator: operator, credHash: credHash, csrf: randomToken(), expires: now.Add(ttl)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID == nil {
		s.byID = map[string]*session{}
	}
	for id, old := range s.byID { // sign-ins are rare; sweeping here keeps the map small
		if !now.Before(old.expires) {
			delete(s.byID, id)
		}
	}
	s.byID[sess.id] = sess
	return sess
}

// get returns a copy of the live session with that id; an expired one is removed.
func (s *sessionStore) get(id string, now time.Time) (session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.byID[id]
	if !ok {
		return session{}, false
	}
	if !now.Before(sess.expires) {
		delete(s.byID, id)
		return session{}, false
	}
	return *sess, true
}

func (s *sessionStore) delete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, id)
}

func (s *sessionStore) setFlash(id, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess, ok := s.byID[id]; ok {
		sess.flash = msg
	}
}

func (s *sessionStore) takeFlash(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.byID[id]
	if !ok {
		return ""
	}
	msg := sess.flash
	sess.flash = ""
	return msg
}

// randomToken returns 256 random bits, URL-safe.
func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// sameSecret compares two secrets in constant time; an empty one never matches.
func sameSecret(got, want string) bool {
	return got != "" && want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// setCookie sets a console cookie: HttpOnly, SameSite=Strict, and Secure unless the request
// came over plain HTTP to a loopback host (make up, tests). Behind a TLS-terminating proxy
// the request reaches Hubu over HTTP but under a public name, so the cookie is Secure then
// too. maxAge below zero deletes it.
func setCookie(w http.ResponseWriter, r *http.Request, name, value, path string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: path, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || !loopbackHost(r.Host),
	})
}

// loopbackHost reports whether host (with or without a port) names this machine.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
