package httpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"

	"hubu.dev/hubu/services/hubu"
)

// maxBody bounds every request body; Hubu's requests are small.
const maxBody = 64 << 10

// decode reads one JSON object into v strictly: JSON content type, bounded size, no unknown
// fields, no trailing data. With optional, an empty body leaves v as it is.
func decode(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return hubu.Errorf(hubu.CodePayloadTooLarge, "the request body is larger than %d bytes", maxBody)
	}
	if err != nil {
		return hubu.Errorf(hubu.CodeInvalidArguments, "could not read the request body")
	}
	if optional && len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return hubu.Errorf(hubu.CodeUnsupportedMediaType, "the request body must be application/json")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return hubu.Errorf(hubu.CodeInvalidArguments, "malformed request body: %s", describe(err))
	}
	if dec.More() {
		return hubu.Errorf(hubu.CodeInvalidArguments, "malformed request body: more than one JSON value")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return hubu.Errorf(hubu.CodeInvalidArguments, "malformed request body: trailing data")
	}
	return nil
}

// describe names what was wrong without echoing the body back.
func describe(err error) string {
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return "invalid JSON"
	case errors.As(err, &typeErr):
		if typeErr.Field != "" {
			return "field " + typeErr.Field + " must be " + kindOf(typeErr.Type.Kind().String()) + " in range"
		}
		return "wrong JSON type"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the body is empty or cut short"
	}
	msg := err.Error()
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return msg // "json: unknown field \"x\"" and the like: names only, never values
}

func kindOf(k string) string {
	switch k {
	case "int", "int64", "int32":
		return "an integer"
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	}
	return "a " + k
}
