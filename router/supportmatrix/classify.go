// Package supportmatrix turns --diagnose-meta logs (the _meta shapes the router records, never
// values) into the client support matrix: which _meta keys each client sends, which of them could
// identify a call, and what the router decides for that shape.
//
// The verdict is never copied from the log: the package rebuilds a synthetic _meta of the recorded
// shape (same keys, JSON types, string lengths, object member names) and asks identity.Normalize,
// the router's own decision. The verdict the log recorded is compared with it, and a difference is
// reported, so a matrix made with an older router, or fixtures left behind by a change of the
// identity rules, show up instead of passing silently.
package supportmatrix

import (
	"cmp"
	"slices"
	"strings"

	"hubu.dev/hubu/router/identity"
)

// Class is what a _meta key is to the support matrix.
type Class int

const (
	// PerCallID keys carry a call's trusted identity: exactly the keys of identity.Sources.
	PerCallID Class = iota
	// CallLevel keys are written by the harness for this call, turn or window (a request id, a
	// progress token, trace context). They are never identity (docs/unified-mcp-reference.md): the matrix lists them
	// because a client that fills these in usually has a per-call id it could send.
	CallLevel
	// Context keys describe the conversation, the user, the organization or the device; the same
	// for every call of a session. Every key that is neither of the above is context.
	Context
)

func (c Class) String() string {
	switch c {
	case PerCallID:
		return "per-call id"
	case CallLevel:
		return "call-level"
	default:
		return "context"
	}
}

// knownKey is a _meta key seen from a real client, with its class and why.
type knownKey struct {
	Key   string
	Class Class
	Why   string
}

// knownKeys classifies the _meta keys clients are known to send, in the order the matrix lists
// them (the order of the table in "What the clients actually send"). Keys missing from here are
// context keys, listed after the known ones in byte order. identity.Sources keys are not listed:
// they are per-call ids by definition, and a test keeps this table free of them.
var knownKeys = []knownKey{
	{"itemId", CallLevel, "Codex: the conversation item of this tool call"},
	{"openai/request_id", CallLevel, "OpenAI: the id of this request (not its call's identity: see docs/unified-mcp-reference.md)"},
	{"sessionId", CallLevel, "Codex harness field sent with each call next to callId (its session, so never identity)"},
	{"windowId", CallLevel, "Codex harness field sent with each call next to callId (its window, so never identity)"},
	{"progressToken", CallLevel, "MCP: the token of this request's progress notifications"},
	{"x-codex-turn-metadata", CallLevel, "Codex CLI: this turn's metadata (turn id, model, sandbox), the same for every call of the turn"},
	{"traceparent", CallLevel, "W3C trace context of this request"},
	{"tracestate", CallLevel, "W3C trace context of this request"},
	{"openai/session", Context, "OpenAI: the conversation, the same for all its calls"},
	{"threadId", Context, "Codex: the conversation (thread); the router binds callId to it, but it is never identity"},
	{"openai/subject", Context, "OpenAI: the signed-in user"},
	{"openai/organization", Context, "OpenAI: the user's organization"},
	{"openai/userLocation", Context, "OpenAI: the user's coarse location"},
	{"openai/locale", Context, "OpenAI: the user's locale"},
	{"openai/userAgent", Context, "OpenAI: the client app"},
	{"timezone", Context, "the user's time zone"},
}

// Classify returns the class of a _meta key.
func Classify(key string) Class {
	if isSourceKey(key) {
		return PerCallID
	}
	if i := knownIndex(key); i >= 0 {
		return knownKeys[i].Class
	}
	return Context
}

func isSourceKey(key string) bool {
	return sourceIndex(key) >= 0
}

func sourceIndex(key string) int {
	return slices.IndexFunc(identity.Sources, func(s identity.Source) bool { return s.Key == key })
}

func knownIndex(key string) int {
	return slices.IndexFunc(knownKeys, func(k knownKey) bool { return k.Key == key })
}

// sortKeys orders keys as the matrix lists them: identity sources in identity.Sources order, then
// knownKeys order, then the rest in byte order.
func sortKeys(keys []string) {
	rank := func(k string) int {
		if i := sourceIndex(k); i >= 0 {
			return i
		}
		if i := knownIndex(k); i >= 0 {
			return len(identity.Sources) + i
		}
		return len(identity.Sources) + len(knownKeys)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(rank(a)-rank(b), strings.Compare(a, b)) })
}
