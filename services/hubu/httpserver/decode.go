package httpserver

import (
	"errors"
	"net/http"

	"hubu.dev/hubu/kit/httpjson"
	"hubu.dev/hubu/services/hubu"
)

// decodeCodes maps a refused body to Hubu's codes.
var decodeCodes = map[httpjson.Kind]hubu.Code{
	httpjson.Invalid:              hubu.CodeInvalidArguments,
	httpjson.TooLarge:             hubu.CodePayloadTooLarge,
	httpjson.UnsupportedMediaType: hubu.CodeUnsupportedMediaType,
}

// decode reads the request body strictly (see httpjson.Decode) into v.
func decode(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	err := httpjson.Decode(w, r, v, optional)
	var de *httpjson.DecodeError
	if errors.As(err, &de) {
		return &hubu.Error{Code: decodeCodes[de.Kind], Message: de.Message}
	}
	return err
}
