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
)

// MaxBody bounds every request body; the services' requests are small.
const MaxBody = 64 << 10

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
// encoding/json would keep the last one and match names case-insensitively, so two readers
// of the same body could see different values.
func noDuplicateKeys(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		object bool
		keys   map[string]bool
		key    bool // the next string token in this object is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return nil // a syntax error; the decoder proper reports it
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if k, isKey := tok.(string); isKey && top != nil && top.object && top.key {
			lk := strings.ToLower(k)
			if top.keys[lk] {
				return fmt.Errorf("key %q appears twice in one object", k)
			}
			top.keys[lk] = true
			top.key = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, keys: map[string]bool{}, key: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: in an object the next token is a key again.
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].key = true
		}
	}
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
