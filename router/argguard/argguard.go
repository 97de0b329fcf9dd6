// Package argguard refuses tool-call arguments that try to carry call identity (see "Identity
// rules" in docs/unified-mcp-reference.md). Identity comes from the harness in params._meta; arguments are written by the
// model, so an identity-looking key anywhere in them is refused before anything is recorded, rather
// than ignored, so that no later step can mistake it for the real thing.
package argguard

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Forbidden lists the normalized keys (see Normalized) that name call identity.
var Forbidden = [...]string{
	"operationkey",
	"callid",
	"tooluseid",
	"toolcallid",
	"invocationid",
	"harnesscallid",
	"idempotencykey",
	"requestid",
	"taskid",
	"platform",
	"installationid",
	"meta",
	"claudecodetooluseid",
	"hubudevplatforminvocation",
}

// Normalized lower-cases key and removes the characters _ - . and /, so that "Tool-Call-ID",
// "tool_call_id" and "toolCallId" all become "toolcallid". Lower-casing is Unicode's, which errs on
// the side of refusing: "İ" (U+0130) and the Kelvin sign lower-case to ASCII "i" and "k".
func Normalized(key string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '_', '-', '.', '/':
			return -1
		}
		return r
	}, strings.ToLower(key))
}

// IsForbidden reports whether key, once normalized, names call identity.
func IsForbidden(key string) bool { return slices.Contains(Forbidden[:], Normalized(key)) }

// MaxKeyShown bounds how much of an offending key an IdentityError repeats.
const MaxKeyShown = 64

// ErrIdentityInArguments matches (with errors.Is) every *IdentityError: the router answers
// identity_in_arguments.
var ErrIdentityInArguments = errors.New("identity in arguments")

// ErrMalformed matches (with errors.Is) every *MalformedError: the router answers invalid_arguments.
var ErrMalformed = errors.New("malformed arguments")

// IdentityError refuses arguments that contain an identity key. It names the key, never a value.
type IdentityError struct {
	// Key is the offending key as the client wrote it (JSON escapes decoded), with control and
	// formatting characters removed and cut to MaxKeyShown characters.
	Key       string
	Truncated bool // Key was cut
}

func (e *IdentityError) Error() string {
	key := strconv.Quote(e.Key)
	if e.Truncated {
		key += "..."
	}
	return "arguments must not carry call identity: key " + key +
		" is reserved; the call's identity comes from the MCP client (_meta), never from arguments"
}

// Is makes errors.Is(err, ErrIdentityInArguments) true for every *IdentityError.
func (e *IdentityError) Is(target error) bool { return target == ErrIdentityInArguments }

// MalformedError refuses arguments that are not one well-formed JSON value. Its message never
// quotes the arguments.
type MalformedError struct {
	Offset int64 // byte offset of the error in the arguments, -1 when unknown
	err    error
}

func (e *MalformedError) Error() string {
	if e.Offset < 0 {
		return "arguments are not valid JSON"
	}
	return "arguments are not valid JSON (at byte " + strconv.FormatInt(e.Offset, 10) + ")"
}

// Is makes errors.Is(err, ErrMalformed) true for every *MalformedError.
func (e *MalformedError) Is(target error) bool { return target == ErrMalformed }

// Unwrap returns encoding/json's error, whose text may quote the input: do not show it to callers.
func (e *MalformedError) Unwrap() error { return e.err }

// Check refuses arguments in which any object key, at any depth (inside nested objects and arrays),
// normalizes to one of Forbidden, with an *IdentityError naming the first such key. Only keys count:
// a string value "callId" is fine. Arguments that are not one well-formed JSON value are refused
// with a *MalformedError. Absent arguments (empty or only whitespace) pass.
func Check(arguments []byte) error {
	if len(bytes.TrimLeft(arguments, " \t\r\n")) == 0 {
		return nil
	}
	// Decoder.Token checks the grammar token by token but is content with a stream of values, so
	// validate the whole first; this also makes a malformed input's error independent of its keys.
	if !json.Valid(arguments) {
		return malformed(arguments)
	}
	dec := json.NewDecoder(bytes.NewReader(arguments))
	dec.UseNumber() // no float conversion, so no range errors
	// For each open container: is it an object, and if so, is its next string token a key?
	type frame struct{ object, wantKey bool }
	var stack []frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &MalformedError{Offset: dec.InputOffset(), err: err}
		}
		if n := len(stack); n > 0 && stack[n-1].object {
			top := &stack[n-1]
			if key, ok := tok.(string); ok && top.wantKey && IsForbidden(key) {
				return identityError(key)
			}
			// An object's tokens alternate key and value; a nested container is its member's
			// value, and the object's own closing '}' pops the frame.
			top.wantKey = !top.wantKey
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			stack = append(stack, frame{object: tok == json.Delim('{'), wantKey: tok == json.Delim('{')})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

func malformed(arguments []byte) error {
	var raw json.RawMessage
	err := json.Unmarshal(arguments, &raw)
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return &MalformedError{Offset: se.Offset, err: err}
	}
	return &MalformedError{Offset: -1, err: err}
}

func identityError(key string) *IdentityError {
	shown := []rune(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, key))
	if len(shown) > MaxKeyShown {
		return &IdentityError{Key: string(shown[:MaxKeyShown]), Truncated: true}
	}
	return &IdentityError{Key: string(shown)}
}
