package httpjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	t.Parallel()
	type body struct {
		N int64  `json:"n"`
		S string `json:"s"`
	}
	cases := []struct {
		name, ctype, body string
		optional          bool
		kind              Kind
		ok                bool
	}{
		{"valid", "application/json", `{"n":1,"s":"x"}`, false, 0, true},
		{"charset parameter", "application/json; charset=utf-8", `{"n":1}`, false, 0, true},
		{"optional and empty", "", ``, true, 0, true},
		{"required and empty", "application/json", ``, false, Invalid, false},
		{"unknown field", "application/json", `{"n":1,"x":2}`, false, Invalid, false},
		{"trailing value", "application/json", `{"n":1}{"n":2}`, false, Invalid, false},
		{"trailing garbage", "application/json", `{"n":1} x`, false, Invalid, false},
		{"overflow", "application/json", `{"n":99999999999999999999}`, false, Invalid, false},
		{"fraction", "application/json", `{"n":1.5}`, false, Invalid, false},
		{"wrong type", "application/json", `{"s":1}`, false, Invalid, false},
		{"syntax", "application/json", `{"n":`, false, Invalid, false},
		{"duplicate key", "application/json", `{"n":1,"n":2}`, false, Invalid, false},
		{"duplicate key in another case", "application/json", `{"s":"a","S":"b"}`, false, Invalid, false},
		{"duplicate nested key", "application/json", `{"n":1,"s":"x","x":{"a":[{"b":1,"b":2}]}}`, false, Invalid, false},
		{"not json", "text/plain", `{"n":1}`, false, UnsupportedMediaType, false},
		{"too large", "application/json", `{"s":"` + strings.Repeat("x", MaxBody) + `"}`, false, TooLarge, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(c.body))
			if c.ctype != "" {
				r.Header.Set("Content-Type", c.ctype)
			}
			var v body
			err := Decode(httptest.NewRecorder(), r, &v, c.optional)
			if c.ok {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			de, isDecode := err.(*DecodeError)
			if !isDecode || de.Kind != c.kind {
				t.Fatalf("err = %#v, want kind %v", err, c.kind)
			}
			if strings.Contains(de.Message, "99999") {
				t.Fatalf("the message echoes the body: %q", de.Message)
			}
		})
	}
}

func TestWriteProblem(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	WriteProblem(rec, http.StatusConflict, "create_new_operation", "changed")
	if rec.Code != 409 || rec.Header().Get("Content-Type") != "application/problem+json" ||
		!strings.Contains(rec.Body.String(), `"code":"create_new_operation"`) {
		t.Fatalf("%d %q %s", rec.Code, rec.Header(), rec.Body)
	}
}

func TestNoDuplicateKeys(t *testing.T) {
	t.Parallel()
	for body, dup := range map[string]bool{
		`{"a":{"n":1},"b":{"n":1}}`:         false,
		`[{"n":1},{"n":2}]`:                 false,
		`{"a":[1,{"a":2}],"b":"a"}`:         false,
		`{"a":[1,{"x":2,"x":3}]}`:           true,
		`{"a":{"b":{}},"a":1}`:              true,
		`{"a":"x","b":{"c":[{}]},"A":true}`: true,
		`{"a":1,"\u0061":2}`:                true,  // the same key, escaped
		`{"seed":1,"ſeed":2}`:               true,  // ſ folds to s, as the decoder matches names
		`{"a":"}\"{,\"a\":","b":1}`:         false, // braces, quotes and commas inside a string
		`{"a":["b","b"],"c":{"b":"b"}}`:     false, // strings that are values, not keys
		`{"a":{},"b":[],"c":{"a":{}}}`:      false,
		`{"a":1,"b":[{"a":1}],"a":2}`:       true,
		`{"a\"b":1,"a\"B":2}`:               true,
		`{"a":1, "b" : 2 ,"A" :3}`:          true,
		`{"a":1,"b":`:                       false, // not JSON: the decoder refuses it
		`]`:                                 false,
	} {
		if err := noDuplicateKeys([]byte(body)); (err != nil) != dup {
			t.Errorf("%s: err = %v, want duplicate %v", body, err, dup)
		}
	}
}

// An object of many keys is checked as one of few: a duplicate in any letter case is found
// past the first keys too, and a body of thousands of distinct keys passes.
func TestNoDuplicateKeysInALargeObject(t *testing.T) {
	t.Parallel()
	object := func(extra ...string) string {
		var b strings.Builder
		b.WriteString(`{`)
		for i := range 2000 {
			fmt.Fprintf(&b, `"key%d":%d,`, i, i)
		}
		for _, k := range extra {
			fmt.Fprintf(&b, `%s:0,`, k)
		}
		b.WriteString(`"last":true}`)
		return b.String()
	}
	for extra, dup := range map[string]bool{
		``:              false,
		`"KEY1999"`:     true,
		`"key\u0031"`:   true,  // key1, escaped
		`"seed","ſEED"`: true,  // ſ folds to s
		`"K"`:           false, // the Kelvin sign alone, once
		`"K","k"`:       true,  // the Kelvin sign folds to k
		`"é","É"`:       true,
		`"é","e"`:       false,
	} {
		var keys []string
		if extra != "" {
			keys = strings.Split(extra, ",")
		}
		body := object(keys...)
		if got := noDuplicateKeys([]byte(body)) != nil; got != dup || duplicateByDecoding(t, body) != dup {
			t.Errorf("2,000 keys and %s: duplicate %v, want %v", extra, got, dup)
		}
	}
}

// The scan agrees with a decode token by token on every body of a generated set: objects and
// arrays nested, keys that differ only in case, escaped, or folded, strings that hold JSON.
func TestNoDuplicateKeysAgreesWithTheDecoder(t *testing.T) {
	t.Parallel()
	keys := []string{`"a"`, `"A"`, `"\u0061"`, `"b"`, `"s"`, `"\u017f"`, `"a\"b"`, `"{\"a\":1}"`, `"é"`, `"É"`}
	rng := rand.New(rand.NewPCG(13, 1))
	var value func(depth int) string
	value = func(depth int) string {
		switch n := rng.IntN(6); {
		case depth > 3 || n == 0:
			return []string{`1`, `"x"`, `true`, `null`, `"}{[]:,"`}[rng.IntN(5)]
		case n <= 3:
			var b strings.Builder
			b.WriteString("{")
			for i := range rng.IntN(4) {
				if i > 0 {
					b.WriteString(",")
				}
				b.WriteString(keys[rng.IntN(len(keys))] + ":" + value(depth+1))
			}
			return b.String() + "}"
		default:
			var b strings.Builder
			b.WriteString("[")
			for i := range rng.IntN(4) {
				if i > 0 {
					b.WriteString(" , ")
				}
				b.WriteString(value(depth + 1))
			}
			return b.String() + "]"
		}
	}
	dups := 0
	for range 5000 {
		body := value(0)
		want := duplicateByDecoding(t, body)
		if got := noDuplicateKeys([]byte(body)) != nil; got != want {
			t.Fatalf("%s: duplicate %v, the decoder says %v", body, got, want)
		}
		if want {
			dups++
		}
	}
	if dups < 500 {
		t.Fatalf("only %d of the bodies had a duplicate: the set tests too little", dups)
	}
}

// duplicateByDecoding is the reference: encoding/json's tokens, keys compared as the decoder
// matches field names.
func duplicateByDecoding(t *testing.T, body string) bool {
	dec := json.NewDecoder(strings.NewReader(body))
	type frame struct {
		object bool
		keys   []string
		key    bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return false
		}
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if k, isKey := tok.(string); isKey && top != nil && top.object && top.key {
			for _, seen := range top.keys {
				if strings.EqualFold(seen, k) {
					return true
				}
			}
			top.keys = append(top.keys, k)
			top.key = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, key: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].key = true
		}
	}
}
