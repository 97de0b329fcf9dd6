package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/zitadel/oidc/v3/pkg/oidc"

	"hubu.dev/hubu/kit/netguard"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/credential"
	"hubu.dev/hubu/services/hubu/postgres"
)

// Clients come two ways: dynamic registration (RFC 7591), which gives a client a random id,
// and client ID metadata documents, where the client id is an https URL and the document at it
// says the client's name and redirect URIs. Every client is public (PKCE, no secret).

const (
	maxClientName    = 80
	maxRedirectURIs  = 10
	maxMetadataBytes = 64 << 10
	metadataMaxAge   = time.Hour // a metadata document is fetched again after this long
)

// registration is the part of RFC 7591's client metadata Hubu reads.
type registration struct {
	RedirectURIs            []string `json:"redirect_uris"`
	ClientName              string   `json:"client_name"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	ClientID                string   `json:"client_id"` // a metadata document's own URL
}

// register is RFC 7591's registration endpoint. Whatever authentication method a client asks
// for, it is registered as public ("none"): the answer says so, as §3.2.1 lets a server do.
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST, OPTIONS")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		registrationError(w, "invalid_client_metadata", "the registration must be application/json")
		return
	}
	var reg registration
	if err := json.NewDecoder(io.LimitReader(r.Body, maxMetadataBytes)).Decode(&reg); err != nil {
		registrationError(w, "invalid_client_metadata", "the registration is not a JSON object")
		return
	}
	c, err := clientOf(reg, "")
	if err != nil {
		registrationError(w, "invalid_redirect_uri", err.Error())
		return
	}
	c.ID = credential.New("hubu_client_")
	now := s.now()
	if err := s.store.SaveOAuthClient(r.Context(), c, now); err != nil {
		s.log().ErrorContext(r.Context(), "oauth: register client", "err", err)
		http.Error(w, "the client could not be registered", http.StatusInternalServerError)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{
		"client_id": c.ID, "client_id_issued_at": now.Unix(), "client_name": c.Name, "redirect_uris": c.RedirectURIs,
		"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code", "refresh_token"},
		"response_types": []string{"code"},
	})
}

func registrationError(w http.ResponseWriter, code, description string) {
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": code, "error_description": description})
}

// clientOf checks a registration or metadata document: at least one redirect URI, each an
// absolute URL without a fragment that is https, http on a loopback address (RFC 8252 §7.3), or
// a private-use scheme (§7.1); a printable name. documentURL, for a metadata document, must be
// the client_id it states.
func clientOf(reg registration, documentURL string) (postgres.OAuthClient, error) {
	if documentURL != "" && reg.ClientID != documentURL {
		return postgres.OAuthClient{}, errors.New("the metadata document's client_id is not its own URL")
	}
	if len(reg.RedirectURIs) == 0 || len(reg.RedirectURIs) > maxRedirectURIs {
		return postgres.OAuthClient{}, fmt.Errorf("a client needs 1 to %d redirect_uris", maxRedirectURIs)
	}
	for _, raw := range reg.RedirectURIs {
		if err := checkRedirectURI(raw); err != nil {
			return postgres.OAuthClient{}, err
		}
	}
	name := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return -1
		}
		return r
	}, strings.TrimSpace(reg.ClientName))
	if name == "" {
		name = "an unnamed client"
	}
	if r := []rune(name); len(r) > maxClientName {
		name = string(r[:maxClientName])
	}
	return postgres.OAuthClient{ID: documentURL, Name: name, RedirectURIs: reg.RedirectURIs, MetadataDocument: documentURL != ""}, nil
}

func checkRedirectURI(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || !u.IsAbs() || u.Fragment != "" || strings.Contains(raw, "#"):
		return fmt.Errorf("redirect URI %q must be an absolute URL without a fragment", raw)
	case u.Scheme == "https" && u.Host != "":
		return nil
	case u.Scheme == "http" && isLoopbackHost(u.Hostname()):
		return nil
	case u.Scheme == "http" || u.Scheme == "https" || u.Scheme == "javascript" || u.Scheme == "data" || u.Scheme == "file":
		return fmt.Errorf("redirect URI %q must be https, or http on a loopback address", raw)
	case !strings.Contains(u.Scheme, "."):
		// RFC 8252 §7.1: a private-use scheme is a reverse domain name the app controls.
		return fmt.Errorf("redirect URI %q: a private-use scheme must be a reverse domain name (com.example.app:/callback)", raw)
	}
	return nil
}

// client returns a client by id: a registered one, or the one whose metadata document is at
// the https URL id, fetched now when Hubu has none or an old one.
func (s *Server) client(ctx context.Context, id string) (postgres.OAuthClient, error) {
	c, err := s.store.OAuthClient(ctx, id)
	isDocument := strings.HasPrefix(id, "https://")
	switch {
	case err == nil && (!c.MetadataDocument || (c.FetchedAt != nil && s.now().Sub(*c.FetchedAt) < metadataMaxAge)):
		return c, nil
	case err != nil && hubu.ErrorCode(err) != hubu.CodeNotFound:
		return postgres.OAuthClient{}, err
	case !isDocument:
		return postgres.OAuthClient{}, oidc.ErrInvalidClient().WithDescription("unknown client_id: register first, or use a client ID metadata document URL")
	}
	fetched, err := s.fetchMetadata(ctx, id)
	if err != nil {
		s.log().WarnContext(ctx, "oauth: cannot use a client ID metadata document", "client_id", id, "err", err)
		return postgres.OAuthClient{}, oidc.ErrInvalidClient().WithDescription("the client ID metadata document cannot be used: %s", err.Error())
	}
	now := s.now()
	fetched.FetchedAt = &now
	if err := s.store.SaveOAuthClient(ctx, fetched, now); err != nil {
		return postgres.OAuthClient{}, err
	}
	return fetched, nil
}

// fetchMetadata fetches and checks the client ID metadata document at id: an https URL with a
// path and no fragment, user info or dot segments; fetched through MetadataClient, which
// refuses every address that is not public; at most 64 KiB of JSON, no redirects.
func (s *Server) fetchMetadata(ctx context.Context, id string) (postgres.OAuthClient, error) {
	u, err := url.Parse(id)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.Fragment != "" || u.Path == "" || u.Path == "/" ||
		strings.Contains(u.Path, "/./") || strings.Contains(u.Path, "/../") {
		return postgres.OAuthClient{}, errors.New("a client ID metadata document URL is https, with a path, and no fragment or user")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return postgres.OAuthClient{}, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.fetch.Do(req)
	if err != nil {
		var refused *netguard.RefusedError
		if errors.As(err, &refused) {
			return postgres.OAuthClient{}, errors.New("its host is not a public address")
		}
		return postgres.OAuthClient{}, errors.New("it could not be fetched")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return postgres.OAuthClient{}, fmt.Errorf("its server answered %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes+1))
	if err != nil || len(body) > maxMetadataBytes {
		return postgres.OAuthClient{}, errors.New("it is unreadable or larger than 64 KiB")
	}
	var reg registration
	if err := json.Unmarshal(body, &reg); err != nil {
		return postgres.OAuthClient{}, errors.New("it is not a JSON object")
	}
	if reg.TokenEndpointAuthMethod != "" && reg.TokenEndpointAuthMethod != "none" {
		return postgres.OAuthClient{}, errors.New("only public clients are taken (token_endpoint_auth_method none)")
	}
	return clientOf(reg, id)
}

// MetadataHTTPClient is the client that fetches client ID metadata documents: it connects
// only to public addresses (netguard), follows no redirect, and gives up after 5 s.
func MetadataHTTPClient() *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, Control: netguard.Control}
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			Proxy: nil, DialContext: dialer.DialContext, TLSHandshakeTimeout: 5 * time.Second,
			ResponseHeaderTimeout: 5 * time.Second, MaxResponseHeaderBytes: 16 << 10,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
