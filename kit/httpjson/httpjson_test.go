package httpjson

import (
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
	} {
		if err := noDuplicateKeys([]byte(body)); (err != nil) != dup {
			t.Errorf("%s: err = %v, want duplicate %v", body, err, dup)
		}
	}
}
