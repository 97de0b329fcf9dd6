// Package identity takes the one trusted identity of a tools/call from the harness-written
// params._meta, or refuses the call (docs/unified-mcp-reference.md, "Identity rules").
//
// The identity (platform, call id) becomes the router's idempotency key, so it must come from the
// harness and never from model-written arguments, and exactly one source may supply it. The sources
// are a table ([Sources]) of small mappers; supporting another client is one more entry and touches
// no dedup logic.
//
// Values in _meta are untrusted and may be secrets: error messages name _meta keys, field names and
// names the operator configured, never a value from the request.
package identity

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Error codes, as the router reports them in structuredContent.error.code.
const (
	CodeRequired  = "identity_required"
	CodeAmbiguous = "identity_ambiguous"
	CodeInvalid   = "identity_invalid"
)

// RequiredMessage is the contract sentence every identity_required message contains verbatim.
const RequiredMessage = "Hubu spend tools require supported trusted identity from Codex, Claude Code, or the Hubu platform-invocation envelope"

// The _meta keys that carry identity.
const (
	KeyCodexCallID         = "callId"
	KeyClaudeCodeToolUseID = "claudecode/toolUseId"
	KeyPlatformInvocation  = "hubu.dev/platform-invocation"
)

// Platforms of the harnesses with a _meta key of their own. They are reserved: an envelope may not
// name them, or one call could reach the registry under two keys.
const (
	PlatformCodex      = "codex"
	PlatformClaudeCode = "claude-code"
)

// reservedPlatforms lists the Platform of every fixed-platform entry of Sources (a test keeps the
// two in step; it is not derived from Sources because the envelope mapper, itself in Sources, reads it).
var reservedPlatforms = []string{PlatformCodex, PlatformClaudeCode}

// Patterns of the identity values, shared with proto/platform-invocation.schema.json (a test checks
// the schema uses exactly these). The checks below are hand-written so that they can say which rule
// failed; tests hold them to these patterns.
const (
	CallIDPattern         = `^[A-Za-z0-9._:-]{16,256}$`
	PlatformPattern       = `^[a-z0-9][a-z0-9-]{0,31}$`
	KeyIDPattern          = `^[A-Za-z0-9._:-]{1,64}$`
	SignatureValuePattern = `^[A-Za-z0-9_-]{85}[AQgw]$` // base64url, no padding, of 64 bytes
	// AudiencePattern is a router's installation id (registry.InstallationID): a lower-case UUID.
	AudiencePattern = `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`
	// RequestHashPattern is a request hash as the router writes it (reqhash.Digest.String).
	RequestHashPattern = `^[0-9a-f]{64}$`
)

// Length limits, in bytes, that go with the patterns.
const (
	// MinCallIDLen is the floor below which a call id is too weak to tell calls apart: the ids
	// harnesses send are the model API's tool-call ids (29–30 characters for Codex and Claude
	// Code), and a local or proxy model that makes short ones may repeat them, which would make
	// a new call look like a redelivery of an old one (work silently dropped).
	MinCallIDLen   = 16
	MaxCallIDLen   = 256
	MaxPlatformLen = 32
	MaxKeyIDLen    = 64
)

// Identity is the trusted identity of one call.
type Identity struct {
	Platform string // "codex", "claude-code", or the envelope's platform
	CallID   string // the harness's id of the call: callId, toolUseId or invocation_id
	Source   string // the _meta key it came from
	// Scope is a digest of the conversation the harness sent beside the call id (its source's
	// ScopeKey), or "" when it sent none. A call id is unique only within its conversation:
	// the same id under another scope is a repeated id, not a redelivery.
	Scope string
	// Binding is what a version 2 envelope binds the call to; zero for every other identity.
	// Normalize cannot check it (it knows neither the router's installation nor the request):
	// the caller must, with Binding.Check, before it records anything.
	Binding Binding
}

// Binding is the audience and request hash a signed version 2 envelope carries. The zero
// Binding binds nothing.
type Binding struct {
	Audience    string // the installation id of the router the call is meant for
	RequestHash string // the router's request hash of the call, lower-case hex
}

// Check refuses the call (an *Error with CodeInvalid, naming the field, never a value) unless
// the binding is zero or names this router's installation and this call's request hash. The
// signature already holds both to the platform's key, so a captured envelope cannot be moved to
// another installation (another registry, which would take it for a new operation and charge it)
// or to other arguments.
func (b Binding) Check(installationID, requestHash string) error {
	switch {
	case b == Binding{}:
		return nil
	case b.Audience != installationID:
		return invalid(KeyPlatformInvocation, "audience is not this router's installation id (the operator can print it with hubu-unified-mcp installation-id): the envelope was signed for another router")
	case b.RequestHash != requestHash:
		return invalid(KeyPlatformInvocation, "request_hash does not match this call's tool and arguments: the envelope was signed for another request")
	}
	return nil
}

// Error is a refusal. Code is one of CodeRequired, CodeAmbiguous, CodeInvalid; Message is safe to
// show to the caller and to log.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// DescribeError returns the stable code and the message for a tool error built from an error that
// Normalize returned. Anything else that is not nil is reported as identity_invalid with a generic
// message (fail closed, and never a foreign error's text, which might quote a value).
func DescribeError(err error) (code, message string) {
	if err == nil {
		return "", ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code, e.Message
	}
	return CodeInvalid, "the trusted identity of this call could not be checked"
}

// Source is one _meta key that can carry a call's identity.
type Source struct {
	Key string
	// Platform is the platform of every identity from this key; empty when the value names it.
	Platform string
	// JSONType is the JSON type the value must have: "string" or "object".
	JSONType string
	// Clients names the harnesses known to send this key (for diagnostics and the support matrix).
	Clients string
	// ScopeKey is the _meta key in which harnesses using this source send a stable
	// conversation id beside the call id (Codex: threadId), or "". Its value is never identity
	// and never kept: only a digest of it is (Identity.Scope).
	ScopeKey string
	// Map turns the value into an identity: its Platform, CallID and Binding (Normalize sets
	// Source and Scope). Normalize prefixes its error's text with the key and shows it to the
	// caller, so the text must never contain anything from value. Normalize checks what Map
	// returns against PlatformPattern and CallIDPattern.
	Map func(value any, cfg *Config) (Identity, error)
}

// Sources are the only _meta keys that carry identity, in the order messages list them. Every other
// key (progressToken, openai/session, openai/request_id, traceparent, ...) is ignored.
var Sources = []Source{
	stringSource(KeyCodexCallID, PlatformCodex, "Codex, ChatGPT Work", KeyCodexThreadID),
	stringSource(KeyClaudeCodeToolUseID, PlatformClaudeCode, "Claude Code", ""),
	{
		Key:      KeyPlatformInvocation,
		JSONType: "object",
		Clients:  "platforms the operator accepts (typed envelope: version 1 optionally signed, version 2 signed and bound to this router and the request)",
		Map:      mapEnvelope,
	},
}

// KeyCodexThreadID is where Codex sends the id of the conversation (thread) a call belongs to.
const KeyCodexThreadID = "threadId"

// scopeOf is the digest of the conversation id in meta[key]: a non-empty string, or "" when
// there is none (absent, empty or not a string: the scope is a safeguard beside the identity,
// never identity itself, so its absence refuses nothing).
func scopeOf(meta map[string]any, key string) string {
	if key == "" {
		return ""
	}
	v, ok := meta[key].(string)
	if !ok || v == "" {
		return ""
	}
	sum := sha256.Sum256([]byte("hubu/call-scope/v1\x00" + key + "\x00" + v))
	return hex.EncodeToString(sum[:])
}

// stringSource is a key whose value is the call id itself, on a fixed platform.
func stringSource(key, platform, clients, scopeKey string) Source {
	return Source{
		Key:      key,
		Platform: platform,
		JSONType: "string",
		Clients:  clients,
		ScopeKey: scopeKey,
		Map: func(value any, _ *Config) (Identity, error) {
			s, ok := value.(string)
			if !ok {
				return Identity{}, fmt.Errorf("the value must be a string, got %s", jsonType(value))
			}
			if reason := checkCallID(s); reason != "" {
				return Identity{}, errors.New("the value " + reason)
			}
			return Identity{Platform: platform, CallID: s}, nil
		},
	}
}

// Normalize returns the one trusted identity in meta, the decoded params._meta of a tools/call
// (JSON numbers as float64, objects as map[string]any), or an *Error. cfg may be nil: then no
// envelope platform is accepted. A key present with a JSON null value is present and invalid.
// An identity from a version 2 envelope carries a Binding that the caller must Check.
func Normalize(meta map[string]any, cfg *Config) (Identity, error) {
	var present []Source
	for _, s := range Sources {
		if _, ok := meta[s.Key]; ok {
			present = append(present, s)
		}
	}
	switch len(present) {
	case 0:
		return Identity{}, &Error{Code: CodeRequired, Message: RequiredMessage +
			"; this call has none of the _meta keys " + keyList(Sources)}
	case 1:
	default:
		return Identity{}, &Error{Code: CodeAmbiguous, Message: "this call has more than one trusted identity in _meta (" +
			keyList(present) + "); a call must have exactly one"}
	}
	src := present[0]
	id, err := src.Map(meta[src.Key], cfg)
	if err != nil {
		return Identity{}, invalid(src.Key, err.Error())
	}
	// Whatever a mapper returns becomes part of a registry key: hold every mapper to the contract.
	if checkPlatform(id.Platform) != "" || checkCallID(id.CallID) != "" {
		return Identity{}, invalid(src.Key, "the mapped identity is outside the allowed patterns")
	}
	id.Source, id.Scope = src.Key, scopeOf(meta, src.ScopeKey)
	return id, nil
}

func invalid(key, reason string) *Error {
	return &Error{Code: CodeInvalid, Message: fmt.Sprintf("_meta key %q is invalid: %s", key, reason)}
}

// keyList quotes the keys of srcs for a message.
func keyList(srcs []Source) string {
	keys := make([]string, len(srcs))
	for i, s := range srcs {
		keys[i] = strconv.Quote(s.Key)
	}
	return strings.Join(keys, ", ")
}

// checkID returns why s is not an identifier of at most limit bytes from [A-Za-z0-9._:-] (phrased to
// follow a subject: "is empty"), or "" when it is one.
func checkID(s string, limit int) string {
	switch {
	case s == "":
		return "is empty"
	case len(s) > limit:
		return fmt.Sprintf("is longer than %d bytes", limit)
	}
	for i := 0; i < len(s); i++ {
		if !isIDByte(s[i]) {
			return "contains characters outside [A-Za-z0-9._:-]"
		}
	}
	return ""
}

// checkCallID is checkID for a call id, which must also be at least MinCallIDLen long.
func checkCallID(s string) string {
	if reason := checkID(s, MaxCallIDLen); reason != "" {
		return reason
	}
	if len(s) < MinCallIDLen {
		return fmt.Sprintf("is shorter than %d characters, too weak to tell one call from another (a model that makes short ids may repeat them)", MinCallIDLen)
	}
	return ""
}

func isIDByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == '_' || c == ':' || c == '-'
}

// checkPlatform returns why s does not match PlatformPattern, or "".
func checkPlatform(s string) string {
	switch {
	case s == "":
		return "is empty"
	case len(s) > MaxPlatformLen:
		return fmt.Sprintf("is longer than %d bytes", MaxPlatformLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		lowerOrDigit := 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
		if !lowerOrDigit && (c != '-' || i == 0) {
			return "must be lower-case letters, digits and hyphens, starting with a letter or digit"
		}
	}
	return ""
}

// jsonType names the JSON type of a decoded value (never the value itself).
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64, float32, json.Number, int, int64, int32, uint, uint64, uint32:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	default:
		return "a non-JSON value"
	}
}
