package reqhash

import (
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

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
