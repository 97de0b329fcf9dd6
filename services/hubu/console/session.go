package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
)

// Cookie names. The session cookie holds only a random session id: never the token. The
// sessions themselves are in Postgres (postgres.ConsoleSession), under the hash of that id, so
// every replica of Hubu on the database knows every session.
const (
	sessionCookie = "hubu_console"
	signInCookie  = "hubu_console_signin" // the sign-in form's CSRF token, before there is a session
	basePath      = "/console"
)

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
