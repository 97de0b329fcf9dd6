package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Caller is whom a request acts for. Behind the static token it is the router's one agent and
// both fields are empty; in OAuth mode it is the agent of the person who signed in and the
// grant (a Hubu credential) their token belongs to. The router forwards every call to Hubu and
// Gongbu as the caller, and keeps each agent's calls apart in its registry.
type Caller struct {
	Agent string // the agent's id; "" for the static token's agent
	Grant string // the grant's credential id; "" for the static token
}

// GrantKey is the TokenInfo.Extra key of the grant a verified OAuth token belongs to.
const GrantKey = "hubu_grant"

// CallerOf is the caller a verified token (auth.RequireBearerToken put it on the request)
// stands for; a request without one (stdio, the static token) is the static agent's.
func CallerOf(info *auth.TokenInfo) Caller {
	if info == nil {
		return Caller{}
	}
	grant, _ := info.Extra[GrantKey].(string)
	return Caller{Agent: info.UserID, Grant: grant}
}

// callerOfRequest is CallerOf the token a request carried, if any (in-memory and stdio
// transports carry none).
func callerOfRequest(extra *mcp.RequestExtra) Caller {
	if extra == nil {
		return Caller{}
	}
	return CallerOf(extra.TokenInfo)
}

type callerKey struct{}

// WithCaller returns ctx carrying c, for the backend clients' request editors.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom is the caller ctx carries (WithCaller); the static agent when none.
func CallerFrom(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}
