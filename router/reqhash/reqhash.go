// Package reqhash computes the request hash of a tool call: the SHA-256 of the tool name, a zero
// byte, and the RFC 8785 (JCS) canonical form of the call's arguments (see "Identity rules" in
// docs/unified-mcp-reference.md).
//
// The arguments are parsed strictly first, by the parser in this package rather than by a JCS
// library or encoding/json, because two inputs that mean different things must never hash alike:
// duplicate keys, invalid UTF-8, lone surrogates, numbers outside the JSON grammar, and integers
// beyond ±2^53 (which JCS's IEEE-754 numbers would merge with their neighbours) are refused rather
// than silently normalized.
package reqhash

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
)

// Limits on the arguments of one call. Real arguments are a few hundred bytes and a few levels deep.
const (
	MaxSize  = 256 << 10 // bytes of raw JSON
	MaxDepth = 64        // nested objects and arrays, the top-level object counting as one
)

// MaxSafeInteger is 2^53 - 1, the largest integer above which IEEE-754 doubles, and so JCS
// numbers, stop telling neighbouring integers apart.
const MaxSafeInteger = 1<<53 - 1

// Digest is a request hash.
type Digest [sha256.Size]byte

// String returns the digest as lower-case hex.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// ErrInvalidArguments matches (with errors.Is) every *Error: the router answers invalid_arguments.
var ErrInvalidArguments = errors.New("invalid arguments")

// ErrInvalidTool is returned for an empty tool name or one containing a zero byte, which would make
// the tool/arguments boundary in the hashed bytes ambiguous. Tool names are the router's own, so
// this is a programming error, not the caller's: it does not match ErrInvalidArguments.
var ErrInvalidTool = errors.New("reqhash: tool name is empty or contains a zero byte")

// Reason says why arguments were refused.
type Reason string

const (
	ReasonTooLarge       Reason = "too_large"
	ReasonTooDeep        Reason = "too_deep"
	ReasonSyntax         Reason = "syntax"
	ReasonTrailingData   Reason = "trailing_data"
	ReasonNotObject      Reason = "not_object"
	ReasonInvalidUTF8    Reason = "invalid_utf8"
	ReasonLoneSurrogate  Reason = "lone_surrogate"
	ReasonDuplicateKey   Reason = "duplicate_key"
	ReasonInvalidNumber  Reason = "invalid_number"
	ReasonNumberTooLarge Reason = "number_too_large"
	ReasonNumberTooSmall Reason = "number_too_small"
)

var reasonText = map[Reason]string{
	ReasonTooLarge:       "arguments are larger than 256 KiB",
	ReasonTooDeep:        "arguments are nested deeper than 64 levels",
	ReasonSyntax:         "arguments are not valid JSON",
	ReasonTrailingData:   "arguments have data after the JSON object",
	ReasonNotObject:      "arguments must be a JSON object",
	ReasonInvalidUTF8:    "arguments contain invalid UTF-8",
	ReasonLoneSurrogate:  `arguments contain a \u escape that is not a valid Unicode character (lone surrogate)`,
	ReasonDuplicateKey:   "arguments contain a duplicate object key",
	ReasonInvalidNumber:  "arguments contain a number that is not valid JSON",
	ReasonNumberTooLarge: "arguments contain a number whose magnitude is 2^53 or more; send large integers as strings",
	ReasonNumberTooSmall: "arguments contain a non-zero number too small to represent",
}

// Error refuses arguments. Its message says what is wrong and where, and never quotes the
// arguments, so it is safe to return to the caller and to log.
type Error struct {
	Reason Reason
	Offset int // byte offset in the arguments where the problem was found; -1 when it has none
}

func (e *Error) Error() string {
	msg := reasonText[e.Reason]
	if msg == "" {
		msg = "arguments are invalid"
	}
	if e.Offset >= 0 {
		msg += " (at byte " + strconv.Itoa(e.Offset) + ")"
	}
	return msg
}

// Is makes errors.Is(err, ErrInvalidArguments) true for every *Error.
func (e *Error) Is(target error) bool { return target == ErrInvalidArguments }

// Hash parses arguments strictly and returns the request hash of a call to tool together with the
// canonical (RFC 8785) form of the arguments.
//
// Absent arguments (zero bytes, or only whitespace) and the literal null hash as {}: MCP makes
// arguments optional, and some clients send null for an absent field. Any other top-level value
// that is not an object is refused.
//
// Numbers must fit an IEEE-754 double without losing integers: any number whose value, rounded to
// the nearest double, has magnitude 2^53 or more is refused (so 9007199254740991 is accepted, and
// 9007199254740992, 1e16 and 9007199254740993.0 are not), as is a non-zero number that would round
// to zero. Fractions are otherwise rounded to the nearest double, as JCS prescribes.
//
// Every refusal is an *Error, before anything is hashed.
func Hash(tool string, arguments []byte) (Digest, []byte, error) {
	if tool == "" || strings.IndexByte(tool, 0) >= 0 {
		return Digest{}, nil, ErrInvalidTool
	}
	canonical, err := canonicalize(arguments, true)
	if err != nil {
		return Digest{}, nil, err
	}
	h := sha256.New()
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write(canonical)
	var d Digest
	h.Sum(d[:0])
	return d, canonical, nil
}
