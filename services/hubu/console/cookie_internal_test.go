package console

import (
	"net/http/httptest"
	"testing"
)

// Cookies are Secure everywhere but plain HTTP to this machine (make up, tests); behind a
// TLS-terminating proxy Hubu is reached over HTTP under a public name.
func TestCookieSecureUnlessLoopback(t *testing.T) {
	t.Parallel()
	for host, secure := range map[string]bool{
		"127.0.0.1:8081": false, "localhost:8081": false, "[::1]:8081": false, "localhost": false,
		"hubu.example.com": true, "hubu.example.com:443": true, "10.0.0.5:8081": true,
	} {
		r := httptest.NewRequest("GET", "http://"+host+"/console/", nil)
		r.Host = host
		w := httptest.NewRecorder()
		setCookie(w, r, sessionCookie, "v", "/console", 60)
		cookies := w.Result().Cookies()
		if len(cookies) != 1 || cookies[0].Secure != secure {
			t.Errorf("%s: Secure=%v, want %v", host, len(cookies) == 1 && cookies[0].Secure, secure)
		}
	}
}
