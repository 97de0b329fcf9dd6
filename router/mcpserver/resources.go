package mcpserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"hubu.dev/hubu/proto/contract"
)

// imageURIPrefix begins the URI of the image Gongbu keeps for an operation: the prefix, then
// the operation's public handle. An answer names it (resource_uri) and the agent reads it with
// resources/read: the original in full, whatever its size and however late, for as long as
// Gongbu keeps it. It is never put in a tool result as a resource_link block (some clients fail
// the whole call on one).
const imageURIPrefix = "hubu://images/"

// imageTemplate is the resource template of kept images ({+handle}: a public handle has colons,
// which a plain {handle} would not match).
var imageTemplate = &mcp.ResourceTemplate{
	Name:        "operation-image",
	Title:       "An operation's image",
	Description: "The image a generate_image operation produced, in full, by its public handle (the resource_uri of its result). Only the agent that owns the operation may read it.",
	URITemplate: imageURIPrefix + "{+handle}",
}

// readImage answers resources/read of hubu://images/<public handle> with the image Gongbu
// keeps for that operation, read as the caller's agent (the router's own, or the signed-in
// person's): Gongbu serves it only when Hubu says that agent owns the operation, so another
// agent's image, like a handle nobody has, is not found.
func (r *Router) readImage(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	ctx = WithCaller(ctx, callerOfRequest(req.Extra))
	uri := req.Params.URI
	handle, ok := strings.CutPrefix(uri, imageURIPrefix)
	if !ok || !contract.IsPublicHandle(handle) {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	resp, err := r.cfg.Gongbu.GetOperationImage(ctx, handle, nil)
	if err != nil {
		r.cfg.Logger.WarnContext(ctx, "could not read a kept image from Gongbu", "public_handle", handle, "err", err)
		return nil, fmt.Errorf("%s: Gongbu cannot be reached; try again", CodeBackendUnavailable)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, mcp.ResourceNotFoundError(uri)
	case resp.StatusCode != http.StatusOK:
		r.cfg.Logger.WarnContext(ctx, "could not read a kept image from Gongbu", "public_handle", handle, "status", resp.StatusCode)
		return nil, fmt.Errorf("%s: Gongbu answered %d", CodeBackendUnavailable, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxEmbed+1))
	if err != nil || len(b) > maxEmbed {
		return nil, fmt.Errorf("%s: the image could not be read from Gongbu", CodeBackendUnavailable)
	}
	mimeType := resp.Header.Get("Content-Type")
	if contract.CheckImage(mimeType, b) != nil {
		r.cfg.Logger.ErrorContext(ctx, "Gongbu served what is not a kept image", "public_handle", handle)
		return nil, fmt.Errorf("%s: Gongbu served what is not a kept image", CodeBackendUnavailable)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mimeType, Blob: b}}}, nil
}
