package oauth

import (
	"net/url"
	"testing"
)

func TestReturnToIsAValidCSPSource(t *testing.T) {
	for raw, want := range map[string]string{
		"https://chatgpt.com/connector_platform_oauth_redirect": "https://chatgpt.com",
		"http://127.0.0.1:53682/callback":                       "http://127.0.0.1:53682",
		"com.example.app:/callback":                             "com.example.app:",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := returnTo(u); got != want {
			t.Errorf("returnTo(%s) = %q, want %q", raw, got, want)
		}
	}
}
