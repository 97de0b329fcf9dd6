package httpserver

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu"
)

// statusOf is the one table from error code to HTTP status.
var statusOf = map[hubu.Code]int{
	hubu.CodeInvalidArguments:     http.StatusBadRequest,
	hubu.CodeUnauthorized:         http.StatusUnauthorized,
	hubu.CodeForbidden:            http.StatusForbidden,
	hubu.CodeNotFound:             http.StatusNotFound,
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
	detail := hubu.ErrorMessage(err)
	body := hubuapi.Problem{
		Type:   "https://hubu.dev/problems/" + string(code),
		Title:  http.StatusText(status),
		Status: status,
		Code:   hubuapi.ErrorCode(code),
		Detail: &detail,
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.Default()
	}
	return s.Logger
}
