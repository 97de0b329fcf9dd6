// Package upstreamtest runs a real OpenID Connect provider as a child process for tests of the
// delegated sign-in, and drives its login form as a person's browser would. Production code
// never imports it.
//
// The provider is the example OpenID provider of github.com/zitadel/oidc/v3 (example/server),
// pinned in tools/go.mod and built from there with go build (the build cache makes every build
// after the first take about a second). It is a real program on the library's certified
// provider code, with a username and password form, in-memory users read from a file and one
// confidential client of its own ("web", secret "secret"; only the redirect URIs are settings).
// It listens on every interface at a port chosen free on loopback, and its issuer is
// http://localhost:PORT/ (trailing slash included).
package upstreamtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"hubu.dev/hubu/kit/proctest"
)

// providerPackage is the provider program, a tool of the tools module.
const providerPackage = "github.com/zitadel/oidc/v3/example/server"

// User is a person known to the provider.
type User struct {
	Username, Password string
	Email              string
	EmailVerified      bool
}

// The users every provider has.
var (
	// Ada has a verified email.
	Ada = User{Username: "ada@example.com", Password: "ada-password-1", Email: "ada@example.com", EmailVerified: true}
	// Unverified has an email the provider has not verified.
	Unverified = User{Username: "eve@example.com", Password: "eve-password-1", Email: "eve@example.com"}
	// NoEmail has no email at all.
	NoEmail = User{Username: "noemail", Password: "noemail-password-1"}
)

// Provider is a running provider.
type Provider struct {
	// Issuer is the provider's issuer URL, as its discovery document states it.
	Issuer string
	// ClientID and ClientSecret are the one confidential client the provider has.
	ClientID, ClientSecret string
	// Process is the provider's process; its log is in the test's temporary directory.
	Process *proctest.Process
}

// Start builds and starts a provider whose client accepts redirectURIs, with Ada, Unverified,
// NoEmail and users. It waits (at most 30 s) until discovery answers and stops the provider
// when the test ends.
func Start(t testing.TB, redirectURIs []string, users ...User) *Provider {
	t.Helper()
	if len(redirectURIs) == 0 {
		t.Fatal("upstreamtest.Start: no redirect URI")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "oidc-provider")
	if err := build(t.Context(), bin); err != nil {
		t.Fatalf("build the OpenID provider: %v", err)
	}
	usersFile := filepath.Join(dir, "users.json")
	if err := writeUsers(usersFile, append([]User{Ada, Unverified, NoEmail}, users...)); err != nil {
		t.Fatal(err)
	}
	// The port is chosen free and then handed to the program, which cannot listen on port 0
	// (its issuer names the port); a port taken in between makes the program exit, so try again.
	var lastErr error
	for attempt := range 3 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		p := &Provider{
			Issuer:       "http://localhost:" + port + "/",
			ClientID:     "web",
			ClientSecret: "secret",
			Process: &proctest.Process{
				Name:    "oidc-provider",
				Path:    bin,
				Env:     append(os.Environ(), "PORT="+port, "USERS_FILE="+usersFile, "REDIRECT_URI="+strings.Join(redirectURIs, ",")),
				LogPath: filepath.Join(dir, "oidc-provider-"+strconv.Itoa(attempt)+".log"),
				Addr:    "localhost:" + port,
			},
		}
		if err := p.Process.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Process.Kill() })
		if lastErr = p.waitDiscovery(t.Context(), 30*time.Second); lastErr == nil {
			return p
		}
		_ = p.Process.Kill()
	}
	t.Fatalf("the OpenID provider did not start: %v", lastErr)
	return nil
}

// build runs go build in the tools module, which is outside the workspace.
func build(ctx context.Context, out string) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-C", filepath.Join(root, "tools"), "-o", out, providerPackage)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v\n%s", err, b)
	}
	return nil
}

// repoRoot is the nearest directory at or above the working directory that holds go.work.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work at or above the working directory")
		}
		dir = parent
	}
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

// writeUsers writes the provider's users file: its storage.User records by id.
func writeUsers(path string, users []User) error {
	type record struct {
		ID, Username, Password, FirstName, LastName, Email string
		EmailVerified                                      bool
		PreferredLanguage                                  string
	}
	byID := map[string]record{}
	for i, u := range users {
		id := "user" + strconv.Itoa(i+1)
		byID[id] = record{ID: id, Username: u.Username, Password: u.Password, FirstName: "Test", LastName: u.Username,
			Email: u.Email, EmailVerified: u.EmailVerified, PreferredLanguage: "en"}
	}
	b, err := json.Marshal(byID)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// waitDiscovery polls the discovery document until it names the issuer, the process exits,
// or the timeout passes.
func (p *Provider) waitDiscovery(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var doc struct {
			Issuer string `json:"issuer"`
		}
		if resp, err := client.Get(p.Issuer + ".well-known/openid-configuration"); err == nil {
			err = json.NewDecoder(resp.Body).Decode(&doc)
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusOK && doc.Issuer == p.Issuer {
				return nil
			}
		}
		if !p.Process.Running() {
			return fmt.Errorf("it exited: %s", lastLine(p.Process.Log()))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("discovery did not answer within %s (log: %s)", timeout, p.Process.LogPath)
		case <-tick.C:
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// SignIn is a person's browser from authURL on: it follows the provider's redirects, fills in
// and submits its login form as u, and returns the first redirect that leaves the provider
// (to the client's redirect URI, with code and state, or error) without following it. client
// should have a cookie jar; its redirect policy is not used. A login form shown again (a wrong
// password) or an error page is an error.
func (p *Provider) SignIn(ctx context.Context, client *http.Client, authURL string, u User) (*url.URL, error) {
	issuer, err := url.Parse(p.Issuer)
	if err != nil {
		return nil, err
	}
	noFollow := *client
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	method, target, form := http.MethodGet, authURL, url.Values(nil)
	submitted := false
	for range 20 {
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequestWithContext(ctx, method, target, body)
		if err != nil {
			return nil, err
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := noFollow.Do(req)
		if err != nil {
			return nil, err
		}
		page, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		switch {
		case resp.StatusCode >= 300 && resp.StatusCode < 400:
			next, err := resp.Request.URL.Parse(resp.Header.Get("Location"))
			if err != nil {
				return nil, fmt.Errorf("redirect from %s: %v", target, err)
			}
			if next.Scheme != issuer.Scheme || next.Host != issuer.Host {
				return next, nil
			}
			method, target, form = http.MethodGet, next.String(), nil
		case resp.StatusCode == http.StatusOK && !submitted:
			action, fields, err := loginForm(page, u)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", target, err)
			}
			formURL, err := resp.Request.URL.Parse(action)
			if err != nil {
				return nil, err
			}
			method, target, form, submitted = http.MethodPost, formURL.String(), fields, true
		case resp.StatusCode == http.StatusOK:
			return nil, fmt.Errorf("the provider showed its login form again: wrong username or password for %s?", u.Username)
		default:
			return nil, fmt.Errorf("%s %s: %s: %s", method, target, resp.Status, bytes.TrimSpace(page))
		}
	}
	return nil, errors.New("more than 20 steps without leaving the provider")
}

// loginForm finds the page's first form and fills it in: hidden fields as given, the
// username field and the password field with u's.
func loginForm(page []byte, u User) (action string, fields url.Values, err error) {
	doc, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		return "", nil, err
	}
	var form *html.Node
	for n := range doc.Descendants() {
		if n.Type == html.ElementNode && n.Data == "form" {
			form = n
			break
		}
	}
	if form == nil {
		return "", nil, errors.New("no form on the page")
	}
	fields = url.Values{}
	sawUser, sawPassword := false, false
	for n := range form.Descendants() {
		if n.Type != html.ElementNode || n.Data != "input" {
			continue
		}
		name, typ, value := attr(n, "name"), attr(n, "type"), attr(n, "value")
		switch {
		case name == "":
		case typ == "password":
			fields.Set(name, u.Password)
			sawPassword = true
		case typ == "hidden":
			fields.Set(name, value)
		case name == "username" || name == "login" || name == "email":
			fields.Set(name, u.Username)
			sawUser = true
		default:
			fields.Set(name, value)
		}
	}
	if !sawUser || !sawPassword {
		return "", nil, errors.New("the form has no username and password fields")
	}
	return attr(form, "action"), fields, nil
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}
