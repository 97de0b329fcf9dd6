package httpserver

import (
	"log/slog"
	"net/http"

	"hubu.dev/hubu/kit/httpjson"
	"hubu.dev/hubu/services/hubu"
)

// statusOf is the one table from error code to HTTP status.
var statusOf = map[hubu.Code]int{
	hubu.CodeInvalidArguments:     http.StatusBadRequest,
	hubu.CodeUnauthorized:         http.StatusUnauthorized,
	hubu.CodeCredentialRevoked:    http.StatusUnauthorized,
	hubu.CodeCredentialExpired:    http.StatusUnauthorized,
	hubu.CodeForbidden:            http.StatusForbidden,
	hubu.CodeNotFound:             http.StatusNotFound,
	hubu.CodeMethodNotAllowed:     http.StatusMethodNotAllowed,
	hubu.CodeConflict:             http.StatusConflict,
	hubu.CodeCreateNewOperation:   http.StatusConflict,
	hubu.CodePayloadTooLarge:      http.StatusRequestEntityTooLarge,
	hubu.CodeUnsupportedMediaType: http.StatusUnsupportedMediaType,
	hubu.CodeInternal:             http.StatusInternalServerError,
	hubu.CodeUnavailable:          http.StatusServiceUnavailable,
}

// writeError answers with problem details. Only internal errors are logged, and their
// details stay in the log.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := hubu.ErrorCode(err)
	status, ok := statusOf[code]
	if !ok {
		status = http.StatusInternalServerError
	}
	if code == hubu.CodeInternal {
		s.logger().ErrorContext(r.Context(), "internal error", "method", r.Method, "route", routeOf(r), "err", err)
	}
	httpjson.WriteProblem(w, status, string(code), hubu.ErrorMessage(err))
}

func writeJSON(w http.ResponseWriter, status int, v any) { httpjson.WriteJSON(w, status, v) }

func (s *Server) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.Default()
	}
	return s.Logger
}
