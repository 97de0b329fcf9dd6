package mcpserver

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"hubu.dev/hubu/router/argguard"
	"hubu.dev/hubu/router/identity"
	"hubu.dev/hubu/router/registry"
	"hubu.dev/hubu/router/reqhash"
)

// toolCall is a call that passed the checks every tool makes.
type toolCall struct {
	args []byte // the raw arguments, with no identity in them
	// call is the trusted call and its request hash, for identified tools only.
	call registry.Call
}

// handler is what every call goes through: it refuses identity in the arguments (at any
// depth) and malformed JSON before anything else, identifies the call for an identified
// tool, writes the --diagnose-meta line, runs the tool and builds the MCP result, all in the
// call's span (see startCallSpan).
func (r *Router) handler(t tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
		ctx, span := startCallSpan(ctx, t.Name, req)
		defer func() { span.end(res) }()
		ctx = WithCaller(ctx, callerOfRequest(req.Extra))
		c := toolCall{args: []byte("{}")}
		if req.Params != nil && len(req.Params.Arguments) > 0 {
			c.args = req.Params.Arguments
		}
		verdict := "" // a tool that needs no identity gets the verdict on its _meta alone
		refused := checkArguments(c.args)
		switch {
		case refused != nil && t.identified:
			verdict = refused.Error.Code
		case t.identified:
			refused, verdict = r.identify(ctx, req, t.Name, &c)
		}
		r.diagnose(req, verdict)
		switch {
		case refused != nil:
			r.countCall(t.Name, ResolutionRefused)
			return refused.toResult(), nil
		case !t.identified:
			r.countCall(t.Name, ResolutionNone)
		}
		return t.run(ctx, c).toResult(), nil
	}
}

func checkArguments(args []byte) *answer {
	err := argguard.Check(args)
	var idErr *argguard.IdentityError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &idErr):
		a := refusal(CodeIdentityInArguments, "%s", idErr.Error())
		return &a
	default:
		a := refusal(CodeInvalidArguments, "the arguments are not valid JSON")
		return &a
	}
}

// identify takes exactly one trusted identity from _meta and hashes the request, which make
// the call the registry records, as the call of the caller ctx carries; verdict is what
// --diagnose-meta says of it.
func (r *Router) identify(ctx context.Context, req *mcp.CallToolRequest, tool string, c *toolCall) (refused *answer, verdict string) {
	id, err := identity.Normalize(metaOf(req), r.cfg.Identity)
	if err != nil {
		return identityRefusal(err)
	}
	digest, _, err := reqhash.Hash(tool, c.args)
	if err != nil {
		a := refusal(CodeInvalidArguments, "%s", err.Error())
		return &a, "accepted:" + id.Platform
	}
	// A version 2 envelope is signed for one installation and one request, which Normalize
	// cannot know: refuse it anywhere else before the registry records anything.
	if err := id.Binding.Check(r.cfg.Registry.InstallationID(), digest.String()); err != nil {
		return identityRefusal(err)
	}
	c.call = registry.Call{
		Agent: CallerFrom(ctx).Agent, Platform: id.Platform, CallID: id.CallID, Scope: id.Scope, Tool: tool, RequestHash: digest.String(),
	}
	return nil, "accepted:" + id.Platform
}

func identityRefusal(err error) (*answer, string) {
	code, msg := identity.DescribeError(err)
	a := refusal(code, "%s", msg)
	return &a, code
}

func metaOf(req *mcp.CallToolRequest) map[string]any {
	if req.Params == nil {
		return nil
	}
	return req.Params.Meta
}

// byHandle is the work of a tool that names an operation by its public handle: it decodes
// the handle strictly, and scrubs the answer of the private key behind the handle when this
// router made it.
func (r *Router) byHandle(run func(ctx context.Context, handle string) answer) func(context.Context, toolCall) answer {
	return func(ctx context.Context, c toolCall) answer {
		handle, bad := handleArgs(c.args)
		if bad != nil {
			return *bad
		}
		a := run(ctx, handle)
		key, _, err := r.cfg.Registry.OperationKeyFor(ctx, CallerFrom(ctx).Agent, handle)
		if err != nil {
			r.cfg.Logger.WarnContext(ctx, "registry lookup failed", "err", err)
		}
		return r.scrubbed(ctx, a, key)
	}
}
