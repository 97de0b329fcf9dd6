package hubu

import (
	"errors"
	"fmt"
)

// Code is a stable error code; clients branch on it. httpserver maps each to one HTTP status.
type Code string

const (
	CodeInvalidArguments     Code = "invalid_arguments"
	CodeUnauthorized         Code = "unauthorized"
	CodeCredentialRevoked    Code = "credential_revoked" // the token was valid once; an operator revoked it
	CodeCredentialExpired    Code = "credential_expired" // the token was replaced by a rotation and its overlap is over
	CodeForbidden            Code = "forbidden"
	CodeNotFound             Code = "not_found"
	CodeMethodNotAllowed     Code = "method_not_allowed"
	CodeConflict             Code = "conflict"
	CodeCreateNewOperation   Code = "create_new_operation"
	CodePayloadTooLarge      Code = "payload_too_large"
	CodeUnsupportedMediaType Code = "unsupported_media_type"
	CodeInternal             Code = "internal"
	CodeUnavailable          Code = "unavailable"
)

// Error is Hubu's one error type. Message is safe to show to the caller. Any error that is
// not an *Error is internal: it is logged, and the caller sees only "internal error".
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Errorf returns an *Error with a formatted, caller-safe message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err, or CodeInternal for anything that is not an *Error.
func ErrorCode(err error) Code {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	return CodeInternal
}

// ErrorMessage returns the caller-safe message of err; internal details never reach a client.
func ErrorMessage(err error) string {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Message
	}
	return "internal error"
}

// ErrInputsNeeded says a new edit's price and size need its input images' sizes, which the
// request did not bring: the caller reads them (Gongbu keeps the images) and asks again.
var ErrInputsNeeded = errors.New("the sizes of the edit's input images are needed")
