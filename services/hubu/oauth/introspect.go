package oauth

import (
	"net/http"
	"strings"

	"hubu.dev/hubu/services/hubu"
)

// introspect is RFC 7662 for routers: a router presents a token a person sent it and learns
// whether it is active, for which resource (its audience, which the router checks is itself),
// which agent and which grant. Only a router's credential may ask (bearer); anything else is
// refused, so the endpoint is no oracle for whoever holds a token.
func (s *Server) introspect(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	p, err := s.store.Authenticate(r.Context(), bearer, s.now())
	if !ok || err != nil || p.Role != hubu.RoleRouter {
		w.Header().Set("WWW-Authenticate", `Bearer realm="hubu-introspection"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client", "error_description": "only a router's credential may introspect"})
		return
	}
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request"})
		return
	}
	inactive := map[string]bool{"active": false}
	plain, err := s.provider.Crypto().Decrypt(r.PostForm.Get("token"))
	if err != nil {
		writeJSON(w, http.StatusOK, inactive)
		return
	}
	id, _, ok := splitBearer(plain)
	if !ok {
		writeJSON(w, http.StatusOK, inactive)
		return
	}
	t, err := s.store.OAuthToken(r.Context(), id)
	now := s.now()
	if err != nil || t.Kind != "access" || !live(t, now) {
		writeJSON(w, http.StatusOK, inactive)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"active": true, "token_type": "Bearer", "client_id": t.ClientID, "sub": t.AgentID.String(),
		"aud": t.Audience, "scope": strings.Join(t.Scopes, " "), "iss": s.issuer,
		"iat": t.CreatedAt.Unix(), "exp": t.ExpiresAt.Unix(), GrantClaim: t.GrantID.String(),
	})
}

// GrantClaim is the introspection member naming the grant (a Hubu credential) a token
// belongs to: the router forwards its calls as that grant (contract.GrantHeader).
const GrantClaim = "hubu_grant"
