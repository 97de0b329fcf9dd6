package oauth

import (
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"hubu.dev/hubu/services/hubu/postgres"
)

// ScopeHubu is the one scope Hubu's tokens carry: acting for the person's agent through a
// router. (offline_access, for the refresh token, is added to every grant.)
const ScopeHubu = "hubu"

// client is a registered or metadata-document client as the library reads it. Every client
// is public and native in the library's terms: PKCE instead of a secret, and a loopback
// redirect URI matches on any port (RFC 8252 §7.3); any other redirect URI matches exactly.
type client struct {
	postgres.OAuthClient
	issuer string
}

var _ op.Client = client{}

func (c client) GetID() string                    { return c.ID }
func (c client) RedirectURIs() []string           { return c.OAuthClient.RedirectURIs }
func (c client) PostLogoutRedirectURIs() []string { return nil }
func (c client) ApplicationType() op.ApplicationType {
	return op.ApplicationTypeNative
}
func (c client) AuthMethod() oidc.AuthMethod { return oidc.AuthMethodNone }
func (c client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c client) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}
}
func (c client) LoginURL(id string) string           { return c.issuer + signInPath + "?request=" + id }
func (c client) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeBearer }
func (c client) IDTokenLifetime() time.Duration      { return time.Hour }
func (c client) DevMode() bool                       { return false }
func (c client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c client) IsScopeAllowed(scope string) bool     { return scope == ScopeHubu }
func (c client) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c client) ClockSkew() time.Duration             { return 0 }
