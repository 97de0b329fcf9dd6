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
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
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

// canonicalize returns the JCS form of arguments, which must be an object. safeNumbers applies the
// ±2^53 rule; only the tests turn it off, to check the serializer against RFC 8785's own examples.
func canonicalize(arguments []byte, safeNumbers bool) ([]byte, error) {
	if len(arguments) > MaxSize {
		return nil, &Error{Reason: ReasonTooLarge, Offset: -1}
	}
	p := parser{data: arguments, safeNumbers: safeNumbers}
	p.skipSpace()
	if p.pos == len(p.data) {
		return []byte("{}"), nil
	}
	if p.data[p.pos] == 'n' {
		if err := p.literal("null"); err != nil {
			return nil, err
		}
		if err := p.end(); err != nil {
			return nil, err
		}
		return []byte("{}"), nil
	}
	if p.data[p.pos] != '{' {
		if err := p.value(); err != nil { // a malformed value is a syntax error first
			return nil, err
		}
		return nil, &Error{Reason: ReasonNotObject, Offset: 0}
	}
	p.out = make([]byte, 0, len(arguments))
	if err := p.value(); err != nil {
		return nil, err
	}
	if err := p.end(); err != nil {
		return nil, err
	}
	return p.out, nil
}

// parser reads JSON from data and appends its canonical form to out in one pass. Objects are
// written member by member and then reordered in place once their keys are known.
type parser struct {
	data        []byte
	pos         int
	depth       int
	safeNumbers bool
	out         []byte
	scratch     []byte // reused when reordering an object's members
}

func (p *parser) fail(r Reason) error { return &Error{Reason: r, Offset: p.pos} }

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// end checks that nothing but whitespace follows the top-level value.
func (p *parser) end() error {
	p.skipSpace()
	if p.pos != len(p.data) {
		return p.fail(ReasonTrailingData)
	}
	return nil
}

func (p *parser) value() error {
	p.skipSpace()
	if p.pos == len(p.data) {
		return p.fail(ReasonSyntax)
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.string()
		if err != nil {
			return err
		}
		p.out = appendString(p.out, s)
		return nil
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	case c == '-' || ('0' <= c && c <= '9'):
		return p.number()
	default:
		return p.fail(ReasonSyntax)
	}
}

func (p *parser) literal(lit string) error {
	if len(p.data)-p.pos < len(lit) || string(p.data[p.pos:p.pos+len(lit)]) != lit {
		return p.fail(ReasonSyntax)
	}
	p.pos += len(lit)
	p.out = append(p.out, lit...)
	return nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxDepth {
		return p.fail(ReasonTooDeep)
	}
	return nil
}

func (p *parser) array() error {
	if err := p.enter(); err != nil {
		return err
	}
	p.pos++ // [
	p.out = append(p.out, '[')
	if p.closes(']') {
		return nil
	}
	for {
		if err := p.value(); err != nil {
			return err
		}
		if p.closes(']') {
			return nil
		}
		if p.pos == len(p.data) || p.data[p.pos] != ',' {
			return p.fail(ReasonSyntax)
		}
		p.pos++
		p.out = append(p.out, ',')
	}
}

// closes skips whitespace and, when the next byte is end, reads and writes it and leaves the
// nesting level.
func (p *parser) closes(end byte) bool {
	p.skipSpace()
	if p.pos == len(p.data) || p.data[p.pos] != end {
		return false
	}
	p.pos++
	p.out = append(p.out, end)
	p.depth--
	return true
}

// member is one written object member: its decoded key and where "key":value sits in out.
type member struct {
	key        string
	start, end int
	offset     int // of the key in the input, for a duplicate-key error
}

func (p *parser) object() error {
	if err := p.enter(); err != nil {
		return err
	}
	p.pos++ // {
	p.out = append(p.out, '{')
	base := len(p.out)
	if p.closes('}') {
		return nil
	}
	members := make([]member, 0, 8)
	for {
		p.skipSpace()
		if p.pos == len(p.data) || p.data[p.pos] != '"' {
			return p.fail(ReasonSyntax)
		}
		keyOffset := p.pos
		key, err := p.string()
		if err != nil {
			return err
		}
		p.skipSpace()
		if p.pos == len(p.data) || p.data[p.pos] != ':' {
			return p.fail(ReasonSyntax)
		}
		p.pos++
		start := len(p.out)
		p.out = appendString(p.out, key)
		p.out = append(p.out, ':')
		if err := p.value(); err != nil {
			return err
		}
		members = append(members, member{key: key, start: start, end: len(p.out), offset: keyOffset})
		p.skipSpace()
		if p.pos == len(p.data) {
			return p.fail(ReasonSyntax)
		}
		if p.data[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.data[p.pos] != '}' {
			return p.fail(ReasonSyntax)
		}
		p.pos++
		break
	}
	if err := p.reorder(base, members); err != nil {
		return err
	}
	p.out = append(p.out, '}')
	p.depth--
	return nil
}

// reorder sorts the members written at out[base:] by key (RFC 8785 §3.2.3: UTF-16 code units),
// refuses duplicate keys, and rewrites them comma-separated in that order.
func (p *parser) reorder(base int, members []member) error {
	slices.SortFunc(members, func(a, b member) int {
		if c := compareUTF16(a.key, b.key); c != 0 {
			return c
		}
		return a.offset - b.offset
	})
	for i := 1; i < len(members); i++ {
		if members[i].key == members[i-1].key {
			return &Error{Reason: ReasonDuplicateKey, Offset: members[i].offset}
		}
	}
	p.scratch = append(p.scratch[:0], p.out[base:]...)
	p.out = p.out[:base]
	for i, m := range members {
		if i > 0 {
			p.out = append(p.out, ',')
		}
		p.out = append(p.out, p.scratch[m.start-base:m.end-base]...)
	}
	return nil
}

// compareUTF16 orders valid UTF-8 strings by their UTF-16 code units. That differs from byte (and
// code point) order only between U+E000..U+FFFF and the supplementary planes, whose surrogates
// sort below U+E000.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			ua, ub := firstUnit(ra), firstUnit(rb)
			if ua != ub {
				return int(ua) - int(ub)
			}
			return int(ra) - int(rb) // same high surrogate: the low ones follow code point order
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

func firstUnit(r rune) rune {
	if r >= 0x10000 {
		hi, _ := utf16.EncodeRune(r)
		return hi
	}
	return r
}

// string reads a JSON string starting at its opening quote and returns it decoded. It refuses raw
// control characters, invalid escapes, invalid UTF-8 and escapes that leave a lone surrogate.
func (p *parser) string() (string, error) {
	p.pos++ // "
	start := p.pos
	// Fast path: no escapes, all ASCII.
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		if c == '"' {
			s := string(p.data[start:p.pos])
			p.pos++
			return s, nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		p.pos++
	}
	buf := append([]byte(nil), p.data[start:p.pos]...)
	for {
		if p.pos == len(p.data) {
			return "", p.fail(ReasonSyntax)
		}
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(buf), nil
		case c < 0x20:
			return "", p.fail(ReasonSyntax)
		case c == '\\':
			var err error
			if buf, err = p.escape(buf); err != nil {
				return "", err
			}
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			p.pos++
		default:
			r, n := utf8.DecodeRune(p.data[p.pos:])
			if r == utf8.RuneError && n == 1 {
				return "", p.fail(ReasonInvalidUTF8)
			}
			buf = append(buf, p.data[p.pos:p.pos+n]...)
			p.pos += n
		}
	}
}

// unescaped is the byte each short escape stands for, by the letter after the backslash.
var unescaped = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// escape decodes the escape sequence at p.pos (a backslash) onto buf.
func (p *parser) escape(buf []byte) ([]byte, error) {
	if p.pos+1 >= len(p.data) {
		return nil, p.fail(ReasonSyntax)
	}
	if c := p.data[p.pos+1]; c != 'u' {
		b := unescaped[c]
		if b == 0 {
			return nil, p.fail(ReasonSyntax)
		}
		p.pos += 2
		return append(buf, b), nil
	}
	r, ok := hex4(p.data[p.pos+2:])
	if !ok {
		return nil, p.fail(ReasonSyntax)
	}
	switch {
	case utf16.IsSurrogate(r) && r < 0xDC00:
		// A high surrogate must be followed by an escaped low one.
		next := p.data[p.pos+6:]
		if len(next) < 2 || next[0] != '\\' || next[1] != 'u' {
			return nil, p.fail(ReasonLoneSurrogate)
		}
		lo, ok := hex4(next[2:])
		if !ok {
			return nil, &Error{Reason: ReasonSyntax, Offset: p.pos + 6}
		}
		r = utf16.DecodeRune(r, lo)
		if r == utf8.RuneError {
			return nil, p.fail(ReasonLoneSurrogate)
		}
		p.pos += 12
	case utf16.IsSurrogate(r):
		return nil, p.fail(ReasonLoneSurrogate)
	default:
		p.pos += 6
	}
	return utf8.AppendRune(buf, r), nil
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// shortEscape is the letter after the backslash of each byte JCS escapes in short form.
var shortEscape = [256]byte{'"': '"', '\\': '\\', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}

// appendString writes s as a JCS string (RFC 8785 §3.2.2.2): only ", \ and control characters are
// escaped, with the short forms where JSON has them; everything else is literal UTF-8.
func appendString(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		if e := shortEscape[c]; e != 0 {
			dst = append(dst, '\\', e)
		} else {
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// number reads a JSON number (RFC 8259 §6 grammar, checked here because strconv accepts more) and
// writes it as JCS does: the ECMAScript form of the nearest double.
func (p *parser) number() error {
	start := p.pos
	d := p.data
	i := p.pos
	nonZero := false // a non-zero digit in the significand
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		nonZero = true
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
	default:
		return &Error{Reason: ReasonInvalidNumber, Offset: start}
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i == len(d) || d[i] < '0' || d[i] > '9' {
			return &Error{Reason: ReasonInvalidNumber, Offset: start}
		}
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			nonZero = nonZero || d[i] != '0'
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i == len(d) || d[i] < '0' || d[i] > '9' {
			return &Error{Reason: ReasonInvalidNumber, Offset: start}
		}
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
	}
	// A number glued to letters or digits ("01", "1x", "0x10") is not one JSON number.
	if i < len(d) && isNumberContinuation(d[i]) {
		return &Error{Reason: ReasonInvalidNumber, Offset: start}
	}
	p.pos = i
	f, err := strconv.ParseFloat(string(d[start:i]), 64)
	if err != nil || math.IsInf(f, 0) {
		return &Error{Reason: ReasonNumberTooLarge, Offset: start}
	}
	if p.safeNumbers && math.Abs(f) > MaxSafeInteger {
		return &Error{Reason: ReasonNumberTooLarge, Offset: start}
	}
	if f == 0 && nonZero {
		return &Error{Reason: ReasonNumberTooSmall, Offset: start}
	}
	p.out = appendNumber(p.out, f)
	return nil
}

func isNumberContinuation(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' ||
		c == '.' || c == '+' || c == '-' || c == '_'
}

// appendNumber writes f as ECMAScript's Number.prototype.toString does (ECMA-262 Number::toString,
// RFC 8785 §3.2.2.3), from the shortest decimal digits that round-trip. f must be finite.
func appendNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0') // also -0
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	var tmp [32]byte
	e := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64) // d[.ddd]e±xx
	mant, exp, _ := bytes.Cut(e, []byte{'e'})
	x, _ := strconv.Atoi(string(exp))
	var digitBuf [24]byte
	digits := digitBuf[:0]
	for _, c := range mant {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	k := len(digits)
	n := x + 1 // f = 0.digits × 10^n
	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}
