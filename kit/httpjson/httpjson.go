// Package httpjson is the JSON plumbing every Hubu service's HTTP API shares: strict request
// decoding, JSON responses, and RFC 9457 problem details with a stable code.
package httpjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode"
)

// MaxBody bounds every request body. The services' requests are small but for a spend's
// prompt: a FLUX.2 prompt of 32,000 characters is up to 384 KiB of JSON (12 bytes for a
// character escaped as a surrogate pair).
const MaxBody = 512 << 10

// Kind says what was wrong with a request body.
type Kind int

const (
	Invalid              Kind = iota // malformed, unknown fields, wrong types, trailing data
	TooLarge                         // above MaxBody
	UnsupportedMediaType             // not application/json
)

// DecodeError is a refused request body; Message is safe to show to the caller.
type DecodeError struct {
	Kind    Kind
	Message string
}

func (e *DecodeError) Error() string { return e.Message }

// Decode reads one JSON value into v strictly: JSON content type, at most MaxBody bytes, no
// unknown fields, no trailing data. With optional, an empty body leaves v as it is.
func Decode(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return &DecodeError{TooLarge, fmt.Sprintf("the request body is larger than %d bytes", MaxBody)}
	}
	if err != nil {
		return &DecodeError{Invalid, "could not read the request body"}
	}
	if optional && len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return &DecodeError{UnsupportedMediaType, "the request body must be application/json"}
	}
	if err := noDuplicateKeys(body); err != nil {
		return &DecodeError{Invalid, "malformed request body: " + err.Error()}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &DecodeError{Invalid, "malformed request body: " + describe(err)}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &DecodeError{Invalid, "malformed request body: trailing data after the JSON value"}
	}
	return nil
}

// noDuplicateKeys refuses an object that names a key twice, also in another letter case:
// encoding/json would keep the last one and match names case-insensitively (as
// strings.EqualFold does), so two readers of the same body could see different values.
//
// It scans the body once, without decoding it: every request body passes through here, and
// a token-by-token decode cost more than the decoding proper. A body that is not JSON is let
// through, for the decoder to refuse.
func noDuplicateKeys(body []byte) error {
	var objects []*keySet // the keys seen so far in each open object; nil for an open array
	key := false          // the next string is a key of the innermost object
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '{':
			objects = append(objects, &keySet{})
			key = true
		case '[':
			objects = append(objects, nil)
			key = false
		case '}', ']':
			if len(objects) == 0 {
				return nil
			}
			objects = objects[:len(objects)-1]
			key = false
		case ',':
			key = len(objects) > 0 && objects[len(objects)-1] != nil
		case ':':
			key = false
		case '"':
			end, name, ok := jsonString(body, i)
			if !ok {
				return nil
			}
			if key && len(objects) > 0 && objects[len(objects)-1] != nil {
				if !objects[len(objects)-1].add(name) {
					return fmt.Errorf("key %q appears twice in one object", name)
				}
				key = false
			}
			i = end
		}
	}
	return nil
}

// keySet is the keys seen so far in one object. While there are few they are compared with
// EqualFold one by one, which allocates nothing; past keysCompared, by their folded form in a
// map, so that an object of thousands of keys costs linear time, not quadratic.
type keySet struct {
	keys   [][]byte
	folded map[string]struct{}
}

const keysCompared = 16

// add adds name and reports whether it is new, in any letter case.
func (k *keySet) add(name []byte) bool {
	if k.folded == nil {
		for _, seen := range k.keys {
			if bytes.EqualFold(seen, name) {
				return false
			}
		}
		k.keys = append(k.keys, name)
		if len(k.keys) > keysCompared {
			k.folded = make(map[string]struct{}, 4*len(k.keys))
			for _, seen := range k.keys {
				k.folded[foldKey(seen)] = struct{}{}
			}
			k.keys = nil
		}
		return true
	}
	f := foldKey(name)
	if _, seen := k.folded[f]; seen {
		return false
	}
	k.folded[f] = struct{}{}
	return true
}

// foldKey maps every character of name to one member of its case-folding orbit (the smallest,
// by unicode.SimpleFold), so that two names are EqualFold exactly when their folded forms are
// equal: "seed", "SEED" and "ſeed" all fold to "SEED".
func foldKey(name []byte) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return least
	}, string(name))
}

// jsonString reads the JSON string whose opening quote is at body[start]: the index of its
// closing quote and its value. A string of plain ASCII is its bytes in body; one with an
// escape or any other byte is decoded as encoding/json decodes it (invalid UTF-8 becomes
// U+FFFD), so that it is compared as the decoder will see it. ok is false when the string
// does not end, or does not decode.
func jsonString(body []byte, start int) (end int, value []byte, ok bool) {
	plain := true
	for i := start + 1; i < len(body); i++ {
		switch c := body[i]; {
		case c == '\\':
			plain = false
			i++ // the escaped byte cannot end the string
		case c == '"':
			if plain {
				return i, body[start+1 : i], true
			}
			var s string
			if json.Unmarshal(body[start:i+1], &s) != nil {
				return 0, nil, false
			}
			return i, []byte(s), true
		case c >= 0x80:
			plain = false
		}
	}
	return 0, nil, false
}

// describe names what was wrong without echoing values from the body.
func describe(err error) string {
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return "invalid JSON"
	case errors.As(err, &typeErr):
		if typeErr.Field != "" {
			return "field " + typeErr.Field + " has the wrong type or is out of range"
		}
		return "wrong JSON type"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the body is empty or cut short"
	}
	msg := err.Error() // such as `json: unknown field "x"`: a name, never a value
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return msg
}

// WriteJSON answers with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Problem is an RFC 9457 problem details body with the services' stable code.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail,omitempty"`
}

// WriteProblem answers with problem details for code.
func WriteProblem(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(Problem{
		Type: "https://hubu.dev/problems/" + code, Title: http.StatusText(status), Status: status, Code: code, Detail: detail,
	})
}
