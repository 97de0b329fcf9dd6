package reqhash

import (
	"bytes"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

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
