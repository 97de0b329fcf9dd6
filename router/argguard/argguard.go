// Package argguard refuses tool-call arguments that try to carry call identity (see "Identity
// rules" in docs/unified-mcp-reference.md). Identity comes from the harness in params._meta; arguments are written by the
// model, so an identity-looking key anywhere in them is refused before anything is recorded, rather
// than ignored, so that no later step can mistake it for the real thing.
package argguard

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
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
	// Validate the whole first: the walk below then only has to find the keys, and a malformed
	// input's error is independent of its keys.
	if !json.Valid(arguments) {
		return malformed(arguments)
	}
	return checkKeys(arguments)
}

// checkKeys walks valid JSON and checks each object key. It runs on every tool call, so it
// scans the bytes rather than decode tokens (encoding/json's Decoder.Token allocates one per
// token): a key is decoded only when it has an escape or a non-ASCII byte, and only the
// stack of open containers is kept.
func checkKeys(doc []byte) error {
	var objects []bool // per open container: is it an object
	wantKey := false   // the next string is a key: right after '{', or after ',' in an object
	for i := 0; i < len(doc); i++ {
		switch c := doc[i]; c {
		case '{':
			objects = append(objects, true)
			wantKey = true
		case '[':
			objects = append(objects, false)
			wantKey = false
		case '}', ']':
			objects = objects[:len(objects)-1]
			wantKey = false
		case ',':
			wantKey = len(objects) > 0 && objects[len(objects)-1]
		case ':':
			wantKey = false
		case '"':
			end := stringEnd(doc, i)
			if wantKey {
				if key, forbidden := forbiddenKey(doc[i : end+1]); forbidden {
					return identityError(key)
				}
			}
			wantKey = false
			i = end
		}
		// Numbers, true, false, null and whitespace hold none of the bytes above.
	}
	return nil
}

// stringEnd returns the index of the quote that closes the string starting at doc[start].
func stringEnd(doc []byte, start int) int {
	for i := start + 1; ; i++ {
		switch doc[i] {
		case '\\':
			i++ // the escaped byte ('"', '\\', or the first of \uXXXX, which holds no quote)
		case '"':
			return i
		}
	}
}

// forbiddenKey decodes a quoted key and says whether it names identity. A plain ASCII key (no
// escape) is normalized on the stack; any other goes through encoding/json and Normalized.
func forbiddenKey(quoted []byte) (string, bool) {
	raw := quoted[1 : len(quoted)-1]
	var buf [32]byte // longer than any Forbidden entry
	n := 0
	for _, b := range raw {
		switch {
		case b == '\\' || b >= utf8.RuneSelf:
			var key string
			if err := json.Unmarshal(quoted, &key); err != nil {
				return "", false // cannot happen: the input is valid JSON
			}
			return key, IsForbidden(key)
		case b == '_' || b == '-' || b == '.' || b == '/':
			continue
		case 'A' <= b && b <= 'Z':
			b += 'a' - 'A'
		}
		if n == len(buf) {
			return "", false
		}
		buf[n] = b
		n++
	}
	if !slices.Contains(Forbidden[:], string(buf[:n])) {
		return "", false
	}
	return string(raw), true
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
