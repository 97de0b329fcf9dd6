package upstream_test

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"hubu.dev/hubu/services/hubu/oauth/upstream"
	"hubu.dev/hubu/services/hubu/oauth/upstream/upstreamtest"
)

// redirectURL is Hubu's callback as the provider knows it; nothing listens there, as the
// sign-in stops at the redirect.
const redirectURL = "http://127.0.0.1:9/oauth/signin/oidc/callback"

// TestSignIn drives real sign-ins at a real OpenID provider, one provider for all subtests.
func TestSignIn(t *testing.T) {
	op := upstreamtest.Start(t, []string{redirectURL})
	provider, err := upstream.New(t.Context(), upstream.Config{
		Issuer: op.Issuer, ClientID: op.ClientID, ClientSecret: op.ClientSecret, RedirectURL: redirectURL,
	})
	if err != nil {
		t.Fatal(err)
	}

	// signIn begins a sign-in and signs in at the provider as u: the pending sign-in and the
	// callback's query.
	signIn := func(t *testing.T, u upstreamtest.User) (upstream.Pending, url.Values) {
		t.Helper()
		authURL, pending := provider.Begin()
		jar, _ := cookiejar.New(nil)
		callback, err := op.SignIn(t.Context(), &http.Client{Jar: jar}, authURL, u)
		if err != nil {
			t.Fatal(err)
		}
		if got := callback.Scheme + "://" + callback.Host + callback.Path; got != redirectURL {
			t.Fatalf("the provider redirected to %s, want %s", callback, redirectURL)
		}
		return pending, callback.Query()
	}

	t.Run("verified email", func(t *testing.T) {
		t.Parallel()
		pending, query := signIn(t, upstreamtest.Ada)
		if query.Get("code") == "" || query.Get("state") != pending.State {
			t.Fatalf("callback query %v: want a code and the pending state", query)
		}
		id, err := provider.Finish(t.Context(), pending, query)
		if err != nil {
			t.Fatal(err)
		}
		if id.Email != "ada@example.com" || !id.EmailVerified || id.Subject == "" {
			t.Fatalf("identity %+v, want ada@example.com, verified, with a subject", id)
		}
	})

	t.Run("auth URL", func(t *testing.T) {
		t.Parallel()
		authURL, pending := provider.Begin()
		u, err := url.Parse(authURL)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		want := map[string]string{
			"response_type": "code", "client_id": op.ClientID, "redirect_uri": redirectURL, "scope": "openid email",
			"state": pending.State, "nonce": pending.Nonce, "code_challenge_method": "S256",
		}
		for k, v := range want {
			if q.Get(k) != v {
				t.Errorf("%s=%q, want %q", k, q.Get(k), v)
			}
		}
		if c := q.Get("code_challenge"); c == "" || strings.Contains(authURL, pending.Verifier) {
			t.Errorf("code_challenge %q: want the verifier's S256 hash, never the verifier", c)
		}
		_, other := provider.Begin()
		if other.State == pending.State || other.Nonce == pending.Nonce || other.Verifier == pending.Verifier {
			t.Error("two sign-ins share a secret")
		}
	})

	t.Run("unverified email", func(t *testing.T) {
		t.Parallel()
		pending, query := signIn(t, upstreamtest.Unverified)
		if _, err := provider.Finish(t.Context(), pending, query); !errors.Is(err, upstream.ErrEmailNotVerified) {
			t.Fatalf("Finish: %v, want ErrEmailNotVerified", err)
		}
	})

	t.Run("no email", func(t *testing.T) {
		t.Parallel()
		pending, query := signIn(t, upstreamtest.NoEmail)
		if _, err := provider.Finish(t.Context(), pending, query); !errors.Is(err, upstream.ErrEmailNotVerified) {
			t.Fatalf("Finish: %v, want ErrEmailNotVerified", err)
		}
	})

	t.Run("wrong state", func(t *testing.T) {
		t.Parallel()
		pending, query := signIn(t, upstreamtest.Ada)
		for _, state := range []string{"", pending.State + "x", strings.ToLower(pending.State)} {
			q := maps.Clone(query)
			q.Set("state", state)
			if _, err := provider.Finish(t.Context(), pending, q); !errors.Is(err, upstream.ErrStateMismatch) {
				t.Errorf("state %q: %v, want ErrStateMismatch", state, err)
			}
		}
		// The callback of another sign-in (another tab, or an attacker's own code).
		other, otherQuery := signIn(t, upstreamtest.Ada)
		if _, err := provider.Finish(t.Context(), pending, otherQuery); !errors.Is(err, upstream.ErrStateMismatch) {
			t.Errorf("another sign-in's callback: %v, want ErrStateMismatch", err)
		}
		if _, err := provider.Finish(t.Context(), other, otherQuery); err != nil {
			t.Errorf("the other sign-in itself: %v", err)
		}
	})

	t.Run("tampered code", func(t *testing.T) {
		t.Parallel()
		pending, query := signIn(t, upstreamtest.Ada)
		q := maps.Clone(query)
		code := q.Get("code")
		// A character in the middle: the last one of base64 may carry only unused bits.
		i := len(code) / 2
		q.Set("code", code[:i]+flip(code[i])+code[i+1:])
		if id, err := provider.Finish(t.Context(), pending, q); err == nil {
			t.Fatalf("a tampered code signed in %+v", id)
		}
		q.Del("code")
		if id, err := provider.Finish(t.Context(), pending, q); err == nil {
			t.Fatalf("a callback without a code signed in %+v", id)
		}
	})

	t.Run("code used twice", func(t *testing.T) {
		t.Parallel()
		pending, query := signIn(t, upstreamtest.Ada)
		if _, err := provider.Finish(t.Context(), pending, query); err != nil {
			t.Fatal(err)
		}
		if id, err := provider.Finish(t.Context(), pending, query); err == nil {
			t.Fatalf("a code redeemed twice signed in %+v", id)
		}
	})

	t.Run("wrong PKCE verifier", func(t *testing.T) {
		t.Parallel()
		pending, query := signIn(t, upstreamtest.Ada)
		_, other := provider.Begin()
		pending.Verifier = other.Verifier
		if id, err := provider.Finish(t.Context(), pending, query); err == nil {
			t.Fatalf("a code redeemed with another verifier signed in %+v", id)
		}
	})

	t.Run("wrong nonce", func(t *testing.T) {
		t.Parallel()
		pending, query := signIn(t, upstreamtest.Ada)
		_, other := provider.Begin()
		pending.Nonce = other.Nonce
		if _, err := provider.Finish(t.Context(), pending, query); err == nil || !strings.Contains(err.Error(), "nonce") {
			t.Fatalf("Finish: %v, want a nonce refusal", err)
		}
	})

	t.Run("provider refusal", func(t *testing.T) {
		t.Parallel()
		_, pending := provider.Begin()
		q := url.Values{"state": {pending.State}, "error": {"access_denied"}, "error_description": {"cancelled"}}
		var refusal *upstream.ProviderError
		if _, err := provider.Finish(t.Context(), pending, q); !errors.As(err, &refusal) || refusal.Code != "access_denied" {
			t.Fatalf("Finish: %v, want a ProviderError access_denied", err)
		}
	})

	t.Run("callback from another issuer", func(t *testing.T) {
		t.Parallel()
		pending, query := signIn(t, upstreamtest.Ada)
		q := maps.Clone(query)
		q.Set("iss", "https://other.example.com/")
		if id, err := provider.Finish(t.Context(), pending, q); err == nil {
			t.Fatalf("a callback naming another issuer signed in %+v", id)
		}
	})

	t.Run("no pending sign-in", func(t *testing.T) {
		t.Parallel()
		if id, err := provider.Finish(t.Context(), upstream.Pending{}, url.Values{"state": {""}, "code": {"x"}}); err == nil {
			t.Fatalf("an empty pending sign-in signed in %+v", id)
		}
	})

	t.Run("wrong password", func(t *testing.T) {
		t.Parallel()
		authURL, _ := provider.Begin()
		jar, _ := cookiejar.New(nil)
		u := upstreamtest.Ada
		u.Password += "x"
		if callback, err := op.SignIn(t.Context(), &http.Client{Jar: jar}, authURL, u); err == nil {
			t.Fatalf("a wrong password reached %s", callback)
		}
	})
}

func TestNew(t *testing.T) {
	const redirect = "http://127.0.0.1:9/cb"
	op := upstreamtest.Start(t, []string{redirect})
	cfg := upstream.Config{Issuer: op.Issuer, ClientID: op.ClientID, ClientSecret: op.ClientSecret, RedirectURL: redirect}

	// The issuer must be the one the discovery document states, to the trailing slash.
	bad := cfg
	bad.Issuer = strings.TrimSuffix(op.Issuer, "/")
	if _, err := upstream.New(t.Context(), bad); err == nil {
		t.Error("an issuer that differs from the document's was accepted")
	}
	for name, edit := range map[string]func(*upstream.Config){
		"no issuer":       func(c *upstream.Config) { c.Issuer = "" },
		"no client id":    func(c *upstream.Config) { c.ClientID = "" },
		"no redirect URL": func(c *upstream.Config) { c.RedirectURL = "" },
	} {
		c := cfg
		edit(&c)
		if _, err := upstream.New(t.Context(), c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := upstream.New(ctx, cfg); err == nil {
		t.Error("discovery with a cancelled context succeeded")
	}
	if _, err := upstream.New(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
}

// flip is another character of the base64url alphabet.
func flip(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}
