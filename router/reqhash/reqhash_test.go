package reqhash

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
)

// The example of RFC 8785 §3.2.2 ("numbers", "string", "literals") and its canonical form.
const (
	rfcSample = `{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	rfcSampleCanonical = `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
)

func TestRFC8785Sample(t *testing.T) {
	t.Parallel()
	got, err := canonicalize([]byte(rfcSample), false)
	if err != nil {
		t.Fatalf("canonicalize: %v", err)
	}
	if string(got) != rfcSampleCanonical {
		t.Fatalf("canonical form\n got %s\nwant %s", got, rfcSampleCanonical)
	}

	// Hash adds the ±2^53 rule, which 1E30 breaks.
	_, _, err = Hash("t", []byte(rfcSample))
	assertReason(t, err, ReasonNumberTooLarge)

	// With 1E30 brought into range, Hash gives the RFC's form for everything else.
	in := strings.Replace(rfcSample, "1E30", "1E15", 1)
	want := strings.Replace(rfcSampleCanonical, "1e+30", "1000000000000000", 1)
	_, got, err = Hash("t", []byte(in))
	if err != nil {
		t.Fatalf("Hash: %v", err)
	}
	if string(got) != want {
		t.Fatalf("canonical form\n got %s\nwant %s", got, want)
	}
}

// RFC 8785 §3.2.3: keys sort by UTF-16 code units, so U+1F600 (D83D DE00) comes before U+FB33,
// although its UTF-8 bytes sort after.
func TestRFC8785Sorting(t *testing.T) {
	t.Parallel()
	in := `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	want := "{" +
		`"\r":"Carriage Return",` +
		`"1":"One",` +
		"\"\u0080\":\"Control\"," +
		"\"\u00f6\":\"Latin Small Letter O With Diaeresis\"," +
		"\"\u20ac\":\"Euro Sign\"," +
		"\"\U0001F600\":\"Emoji: Grinning Face\"," +
		"\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"" +
		"}"
	_, got, err := Hash("t", []byte(in))
	if err != nil {
		t.Fatalf("Hash: %v", err)
	}
	if string(got) != want {
		t.Fatalf("canonical form\n got %q\nwant %q", got, want)
	}
}

func TestCompareUTF16(t *testing.T) {
	t.Parallel()
	ordered := []string{"", "\r", "1", "A", "Z", "a", "aa", "ab", "b", "\u0080", "\u00f6", "\u20ac", "\ud7ff",
		"\U00010000", "\U0001F600", "\U0001F600a", "\U0001F601", "\U0010FFFF", "\ue000", "\ufb33", "\uffff"}
	for i, a := range ordered {
		for j, b := range ordered {
			c := compareUTF16(a, b)
			if (i < j && c >= 0) || (i == j && c != 0) || (i > j && c <= 0) {
				t.Errorf("compareUTF16(%q, %q) = %d", a, b, c)
			}
		}
	}
}

// appendNumber must print what ECMAScript's String(x) prints.
func TestAppendNumber(t *testing.T) {
	t.Parallel()
	cases := []struct {
		bits uint64
		want string
	}{ // RFC 8785 appendix B
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, c := range cases {
		if got := string(appendNumber(nil, math.Float64frombits(c.bits))); got != c.want {
			t.Errorf("%016x: got %s, want %s", c.bits, got, c.want)
		}
	}
	for _, c := range []struct {
		f    float64
		want string
	}{
		{1.0, "1"}, {1e2, "100"}, {math.Copysign(0, -1), "0"}, {1e21, "1e+21"}, {1e20, "100000000000000000000"},
		{0.000001, "0.000001"}, {1e-7, "1e-7"}, {1.5e-7, "1.5e-7"}, {123456789012345680000, "123456789012345680000"},
		{-1.5, "-1.5"}, {0.1, "0.1"}, {4.5, "4.5"}, {2e-3, "0.002"}, {1e-27, "1e-27"}, {1e30, "1e+30"},
		{9007199254740991, "9007199254740991"}, {-123.456, "-123.456"}, {1.25e-6, "0.00000125"},
	} {
		if got := string(appendNumber(nil, c.f)); got != c.want {
			t.Errorf("%v: got %s, want %s", c.f, got, c.want)
		}
	}
}

// testdata/es_numbers.txt holds doubles and String(x) as printed by node (testdata/gen_vectors.js).
func TestAppendNumberAgainstECMAScript(t *testing.T) {
	t.Parallel()
	f, err := os.Open("testdata/es_numbers.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		h, want, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			t.Fatalf("bad line %q", sc.Text())
		}
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != 8 {
			t.Fatalf("bad line %q", sc.Text())
		}
		x := math.Float64frombits(binary.BigEndian.Uint64(b))
		if got := string(appendNumber(nil, x)); got != want {
			t.Errorf("%s: got %s, want %s", h, got, want)
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 1000 {
		t.Fatalf("only %d numbers in testdata", n)
	}
}

// testdata/jcs_vectors.json holds documents written with shuffled keys, random whitespace, escapes
// and number spellings, and their canonical form as computed by ECMAScript (testdata/gen_vectors.js).
func TestCanonicalAgainstECMAScript(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/jcs_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var docs []struct{ In, Out string }
	if err := json.Unmarshal(raw, &docs); err != nil {
		t.Fatal(err)
	}
	for i, d := range docs {
		sum, got, err := Hash("t", []byte(d.In))
		if err != nil {
			t.Errorf("doc %d: %v\n%q", i, err, d.In)
			continue
		}
		if string(got) != d.Out {
			t.Errorf("doc %d:\n  in %q\n got %q\nwant %q", i, d.In, got, d.Out)
			continue
		}
		if again, _, err := Hash("t", []byte(d.Out)); err != nil || again != sum {
			t.Errorf("doc %d: canonical form hashes differently (%v)", i, err)
		}
	}
}

func TestHashPinned(t *testing.T) {
	t.Parallel()
	// Expected values computed independently:
	//   python3 -c 'import hashlib; print(hashlib.sha256(b"generate_image\x00" + CANONICAL).hexdigest())'
	cases := []struct {
		tool, in, canonical, digest string
	}{
		{
			"generate_image",
			`{"prompt": "a red fox in the snow", "model": "flux-schnell", "width": 1024, "height": 768, "seed": 42.0}`,
			`{"height":768,"model":"flux-schnell","prompt":"a red fox in the snow","seed":42,"width":1024}`,
			"dc0771ab280cafc428edd13cde3d3c0c614cba9601488cc92ceaae3bcd2c9eba",
		},
		{"capabilities", ``, `{}`, "b498efd75f315626cc694322b3595562e90a263558d87830a04b2533de541428"},
		{"t", `{"\ufb33":1,"\ud83d\ude00":2}`, "{\"\U0001F600\":2,\"\ufb33\":1}", "9ffea030c71224a7c460ff622675a397bb47a53061838b66fe572765dae1ea1c"},
	}
	for _, c := range cases {
		d, canonical, err := Hash(c.tool, []byte(c.in))
		if err != nil {
			t.Fatalf("Hash(%q): %v", c.in, err)
		}
		if string(canonical) != c.canonical {
			t.Errorf("canonical form of %q: got %q, want %q", c.in, canonical, c.canonical)
		}
		if d.String() != c.digest {
			t.Errorf("digest of %q: got %s, want %s", c.in, d, c.digest)
		}
	}
}

func TestHashSameIntent(t *testing.T) {
	t.Parallel()
	groups := [][]string{
		{
			`{"prompt":"fox","model":"flux-dev","width":1024,"height":768}`,
			`{"height":768,"width":1024,"model":"flux-dev","prompt":"fox"}`,
			" {\n\t\"width\" : 1024 ,\r\n \"prompt\":\"fox\", \"height\":768,\"model\":\"flux-dev\"}\n",
			`{"prompt":"\u0066\u006Fx","model":"flux\u002ddev","width":1024.0,"height":7.68e2}`,
			`{"prompt":"fox","model":"flux-dev","width":1.024E+3,"height":76800e-2}`,
		},
		{`{"n":1}`, `{"n":1.0}`, `{"n":1e0}`, `{"n":10e-1}`, `{"n":0.1e1}`},
		{`{"n":0}`, `{"n":-0}`, `{"n":0.0}`, `{"n":-0e5}`},
		{`{"s":"a/b"}`, `{"s":"a\/b"}`},
		{`{"s":"€"}`, `{"s":"\u20ac"}`, `{"s":"\u20AC"}`},
		{"{\"s\":\"\U0001F600\"}", `{"s":"\ud83d\ude00"}`, `{"s":"\uD83D\uDE00"}`},
		{`{}`, ``, `  `, `null`, ` null `, "{ }"},
		{`{"a":{"y":1,"x":[2,{"q":1,"p":0}]}}`, `{"a":{"x":[2,{"p":0,"q":1}],"y":1}}`},
	}
	for _, g := range groups {
		first, firstCanonical, err := Hash("generate_image", []byte(g[0]))
		if err != nil {
			t.Fatalf("Hash(%q): %v", g[0], err)
		}
		for _, in := range g[1:] {
			d, canonical, err := Hash("generate_image", []byte(in))
			if err != nil {
				t.Fatalf("Hash(%q): %v", in, err)
			}
			if d != first || string(canonical) != string(firstCanonical) {
				t.Errorf("%q and %q hash differently:\n%s\n%s", g[0], in, firstCanonical, canonical)
			}
		}
	}
}

func TestHashDifferentIntent(t *testing.T) {
	t.Parallel()
	ins := []string{
		`{}`, `{"prompt":"fox"}`, `{"prompt":"Fox"}`, `{"prompt":"fox "}`, `{"prompt":["fox"]}`, `{"Prompt":"fox"}`,
		`{"n":1}`, `{"n":"1"}`, `{"n":1.5}`, `{"n":-1}`, `{"n":9007199254740991}`, `{"n":9007199254740990}`,
		`{"n":true}`, `{"n":null}`, `{"n":{}}`, `{"n":[]}`, `{"n":[1,2]}`, `{"n":[2,1]}`,
		`{"a":{"b":1}}`, `{"a":{"b":1},"c":1}`, `{"a":"\u0000"}`, `{"a":""}`,
	}
	seen := map[Digest]string{}
	for _, in := range ins {
		d, _, err := Hash("generate_image", []byte(in))
		if err != nil {
			t.Fatalf("Hash(%q): %v", in, err)
		}
		if prev, ok := seen[d]; ok {
			t.Errorf("%q and %q hash alike", prev, in)
		}
		seen[d] = in
	}
}

func TestHashIncludesTool(t *testing.T) {
	t.Parallel()
	args := []byte(`{"model":"flux-dev"}`)
	a, ca, err := Hash("generate_image", args)
	if err != nil {
		t.Fatal(err)
	}
	b, cb, err := Hash("capabilities", args)
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatal("generate_image and capabilities hash alike for equal arguments")
	}
	if string(ca) != string(cb) {
		t.Fatal("canonical form depends on the tool")
	}
	for _, tool := range []string{"", "generate\x00image"} {
		if _, _, err := Hash(tool, args); !errors.Is(err, ErrInvalidTool) || errors.Is(err, ErrInvalidArguments) {
			t.Errorf("Hash(%q): got %v, want ErrInvalidTool", tool, err)
		}
	}
}

func TestHashRefuses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in string
		reason   Reason
	}{
		{"not json", `prompt=fox`, ReasonSyntax},
		{"unterminated object", `{"a":1`, ReasonSyntax},
		{"unterminated string", `{"a":"b`, ReasonSyntax},
		{"missing colon", `{"a" 1}`, ReasonSyntax},
		{"missing value", `{"a":}`, ReasonSyntax},
		{"trailing comma in object", `{"a":1,}`, ReasonSyntax},
		{"trailing comma in array", `{"a":[1,]}`, ReasonSyntax},
		{"unquoted key", `{a:1}`, ReasonSyntax},
		{"single quotes", `{'a':1}`, ReasonSyntax},
		{"comment", `{"a":1 /* c */}`, ReasonSyntax},
		{"raw control character", "{\"a\":\"x\ny\"}", ReasonSyntax},
		{"raw tab in string", "{\"a\":\"x\ty\"}", ReasonSyntax},
		{"bad escape", `{"a":"\x41"}`, ReasonSyntax},
		{"short unicode escape", `{"a":"\u41"}`, ReasonSyntax},
		{"bad literal", `{"a":tru}`, ReasonSyntax},
		{"capital literal", `{"a":True}`, ReasonSyntax},
		{"byte order mark", "\ufeff{}", ReasonSyntax},
		{"non-JSON whitespace", "{\"a\":\u00a01}", ReasonSyntax},
		{"vertical tab", "{\"a\":\v1}", ReasonSyntax},
		{"trailing object", `{"a":1}{"b":2}`, ReasonTrailingData},
		{"trailing garbage", `{"a":1} x`, ReasonTrailingData},
		{"trailing null", `{} null`, ReasonTrailingData},
		{"array", `[1,2]`, ReasonNotObject},
		{"string", `"fox"`, ReasonNotObject},
		{"number", `1`, ReasonNotObject},
		{"true", `true`, ReasonNotObject},
		{"malformed array", `[1,`, ReasonSyntax},
		{"invalid utf-8 in value", "{\"a\":\"\xff\"}", ReasonInvalidUTF8},
		{"invalid utf-8 in key", "{\"\xc3\":1}", ReasonInvalidUTF8},
		{"overlong utf-8", "{\"a\":\"\xc0\xaf\"}", ReasonInvalidUTF8},
		{"utf-8 encoded surrogate", "{\"a\":\"\xed\xa0\x80\"}", ReasonInvalidUTF8},
		{"lone high surrogate", `{"a":"\ud83d"}`, ReasonLoneSurrogate},
		{"lone high surrogate then text", `{"a":"\ud83dx"}`, ReasonLoneSurrogate},
		{"high surrogate then BMP escape", `{"a":"\ud83d\u0041"}`, ReasonLoneSurrogate},
		{"two high surrogates", `{"a":"\ud83d\ud83d"}`, ReasonLoneSurrogate},
		{"lone low surrogate", `{"a":"\ude00"}`, ReasonLoneSurrogate},
		{"reversed pair", `{"a":"\ude00\ud83d"}`, ReasonLoneSurrogate},
		{"lone surrogate in key", `{"\udfff":1}`, ReasonLoneSurrogate},
		{"duplicate key", `{"a":1,"a":2}`, ReasonDuplicateKey},
		{"duplicate key, same value", `{"a":1,"a":1}`, ReasonDuplicateKey},
		{"duplicate key after unescaping", `{"a":1,"\u0061":2}`, ReasonDuplicateKey},
		{"duplicate key, escaped slash", `{"a/b":1,"a\/b":2}`, ReasonDuplicateKey},
		{"duplicate key, surrogate pair", "{\"\U0001F600\":1,\"\\ud83d\\ude00\":2}", ReasonDuplicateKey},
		{"duplicate key, not adjacent", `{"b":1,"a":2,"c":3,"b":4}`, ReasonDuplicateKey},
		{"duplicate key, nested", `{"a":{"x":[{"k":1,"k":2}]}}`, ReasonDuplicateKey},
		{"duplicate empty key", `{"":1,"":2}`, ReasonDuplicateKey},
		{"plus sign", `{"a":+1}`, ReasonSyntax},
		{"leading zero", `{"a":01}`, ReasonInvalidNumber},
		{"negative leading zero", `{"a":-01}`, ReasonInvalidNumber},
		{"hex", `{"a":0x10}`, ReasonInvalidNumber},
		{"leading dot", `{"a":.5}`, ReasonSyntax},
		{"trailing dot", `{"a":1.}`, ReasonInvalidNumber},
		{"dot before exponent", `{"a":1.e5}`, ReasonInvalidNumber},
		{"empty exponent", `{"a":1e}`, ReasonInvalidNumber},
		{"signed empty exponent", `{"a":1e+}`, ReasonInvalidNumber},
		{"lone minus", `{"a":-}`, ReasonInvalidNumber},
		{"minus space", `{"a":- 1}`, ReasonInvalidNumber},
		{"NaN", `{"a":NaN}`, ReasonSyntax},
		{"Infinity", `{"a":Infinity}`, ReasonSyntax},
		{"-Infinity", `{"a":-Infinity}`, ReasonInvalidNumber},
		{"underscore", `{"a":1_000}`, ReasonInvalidNumber},
		{"number then letters", `{"a":1x}`, ReasonInvalidNumber},
		{"2^53", `{"a":9007199254740992}`, ReasonNumberTooLarge},
		{"-2^53", `{"a":-9007199254740992}`, ReasonNumberTooLarge},
		{"2^53+1", `{"a":9007199254740993}`, ReasonNumberTooLarge},
		{"2^53+1 with fraction", `{"a":9007199254740993.0}`, ReasonNumberTooLarge},
		{"1e16", `{"a":1e16}`, ReasonNumberTooLarge},
		{"1E16 fraction form", `{"a":1.0E16}`, ReasonNumberTooLarge},
		{"rounds up to 2^53", `{"a":9007199254740991.5}`, ReasonNumberTooLarge},
		{"large negative exponent form", `{"a":-90071992547409920e-1}`, ReasonNumberTooLarge},
		{"huge", `{"a":1e400}`, ReasonNumberTooLarge},
		{"huge in array", `{"a":[1,2,123456789012345678901234567890]}`, ReasonNumberTooLarge},
		{"underflow", `{"a":1e-400}`, ReasonNumberTooSmall},
		{"negative underflow", `{"a":-0.1e-350}`, ReasonNumberTooSmall},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d, canonical, err := Hash("generate_image", []byte(c.in))
			assertReason(t, err, c.reason)
			if d != (Digest{}) || canonical != nil {
				t.Errorf("a refusal returned a digest or canonical form")
			}
			// Go's own parser agrees that these are not acceptable JSON or not an object, except
			// for the refusals that are ours alone.
			var v map[string]any
			ok := json.Unmarshal([]byte(c.in), &v) == nil
			switch c.reason {
			case ReasonInvalidUTF8, ReasonLoneSurrogate, ReasonDuplicateKey, ReasonNumberTooLarge, ReasonNumberTooSmall:
			default:
				if ok {
					t.Errorf("encoding/json accepts %q", c.in)
				}
			}
		})
	}
}

func TestHashAcceptsEdges(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, canonical string }{
		{`{"a":9007199254740991}`, `{"a":9007199254740991}`},
		{`{"a":-9007199254740991}`, `{"a":-9007199254740991}`},
		{`{"a":9007199254740991.0}`, `{"a":9007199254740991}`},
		{`{"a":9.007199254740991e15}`, `{"a":9007199254740991}`},
		{`{"a":900719925474099.1}`, `{"a":900719925474099.1}`},
		{`{"a":0e-400}`, `{"a":0}`},
		{`{"a":0.000e999}`, `{"a":0}`},
		{`{"a":5e-324}`, `{"a":5e-324}`},
		{`{"a":1e-7}`, `{"a":1e-7}`},
		{`{"a":0.000001}`, `{"a":0.000001}`},
		{`{"a":1E2}`, `{"a":100}`},
		{`{"a":-1.50}`, `{"a":-1.5}`},
		{`{"a":"\u0000\u001f\u007f\u0080\u2028\u2029<>&'"}`, "{\"a\":\"\\u0000\\u001f\u007f\u0080\u2028\u2029<>&'\"}"},
		{`{"a":"\b\f\n\r\t\"\\\/"}`, `{"a":"\b\f\n\r\t\"\\/"}`},
		{`{"a":"\u0008\u000C\u000a\u000D\u0009\u0022\u005C"}`, `{"a":"\b\f\n\r\t\"\\"}`},
		{`{"a":"\uffff\ufffd"}`, "{\"a\":\"\uffff\ufffd\"}"},
		{"{\"\U0010FFFF\":[true,false,null,[],{}]}", "{\"\U0010FFFF\":[true,false,null,[],{}]}"},
		{`{"A":1,"a":2,"B":3,"b":4,"":5}`, `{"":5,"A":1,"B":3,"a":2,"b":4}`},
		{`{"ab":1,"a":2,"abc":3}`, `{"a":2,"ab":1,"abc":3}`},
	}
	for _, c := range cases {
		_, canonical, err := Hash("t", []byte(c.in))
		if err != nil {
			t.Errorf("Hash(%q): %v", c.in, err)
			continue
		}
		if string(canonical) != c.canonical {
			t.Errorf("Hash(%q): canonical %q, want %q", c.in, canonical, c.canonical)
		}
	}
}

func TestHashLimits(t *testing.T) {
	t.Parallel()
	// Exactly MaxDepth levels, the top-level object included, pass; one more fails.
	for _, nest := range []func(depth int) string{
		func(depth int) string { // the top-level object and depth-1 arrays inside it
			return `{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
		},
		func(depth int) string { // depth nested objects
			return strings.Repeat(`{"a":`, depth-1) + "{}" + strings.Repeat("}", depth-1)
		},
	} {
		if _, _, err := Hash("t", []byte(nest(MaxDepth))); err != nil {
			t.Errorf("%d levels: %v", MaxDepth, err)
		}
		_, _, err := Hash("t", []byte(nest(MaxDepth+1)))
		assertReason(t, err, ReasonTooDeep)
	}

	_, _, err := Hash("t", []byte(strings.Repeat("[", 1<<20)))
	assertReason(t, err, ReasonTooLarge)
	_, _, err = Hash("t", []byte(`{"a":`+strings.Repeat("[", 100000)))
	assertReason(t, err, ReasonTooDeep)

	pad := func(n int) []byte { // a valid object of exactly n bytes
		return []byte(`{"a":"` + strings.Repeat("x", n-8) + `"}`)
	}
	if _, _, err := Hash("t", pad(MaxSize)); err != nil {
		t.Errorf("%d bytes: %v", MaxSize, err)
	}
	_, _, err = Hash("t", pad(MaxSize+1))
	assertReason(t, err, ReasonTooLarge)
	if err.Error() != "arguments are larger than 256 KiB" {
		t.Errorf("message %q", err)
	}
}

func TestErrorMessages(t *testing.T) {
	t.Parallel()
	const secret = "SECRETVALUE"
	ins := []string{
		`{"` + secret + `":1,"` + secret + `":2}`,
		`{"a":"` + secret + "\xff" + `"}`,
		`{"a":"` + secret + `\ud800"}`,
		`{"a":` + secret + `}`,
		`{"a":"` + secret + `"} ` + secret,
		`{"a":9007199254740992` + secret + `}`,
		`"` + secret + `"`,
		`{"` + secret + `":99999999999999999999}`,
	}
	for _, in := range ins {
		_, _, err := Hash("t", []byte(in))
		if err == nil {
			t.Fatalf("Hash(%q) accepted", in)
		}
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, ErrInvalidArguments) {
			t.Errorf("Hash(%q): %T is not an *Error matching ErrInvalidArguments", in, err)
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "9007") {
			t.Errorf("message quotes the arguments: %q", err)
		}
		if e.Offset < 0 || e.Offset > len(in) {
			t.Errorf("Hash(%q): offset %d", in, e.Offset)
		}
	}
	_, _, err := Hash("t", []byte(`{"a":1,"a":2}`))
	if got, want := err.Error(), "arguments contain a duplicate object key (at byte 7)"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}

func assertReason(t *testing.T, err error, want Reason) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got error %v, want reason %s", err, want)
	}
	if e.Reason != want {
		t.Fatalf("got reason %s (%v), want %s", e.Reason, err, want)
	}
	if !errors.Is(err, ErrInvalidArguments) {
		t.Fatalf("%v does not match ErrInvalidArguments", err)
	}
}
