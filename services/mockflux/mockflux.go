// Package mockflux is a stand-in for the Black Forest Labs FLUX API: it accepts generation
// tasks, charges each accepted one exactly once (honouring an Idempotency-Key like a payment
// API), takes a configurable render time per task, keeps its jobs, charges and webhook
// outcomes in an fsynced journal when given a data file, and lets tests read the charges and
// inject faults. The HTTP side lives in package httpserver, webhook delivery in package webhook.
package mockflux

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Model is a FLUX model mockflux serves and what a task on it costs.
type Model struct {
	Name        string
	PriceMicros int64 // micro-US-dollars, the whole price, charged at submit time
	// SizeOptional models take an aspect ratio rather than a size, so width and height may be absent.
	SizeOptional bool
}

// Models is the catalog, priced like Hubu's default catalog.
var Models = map[string]Model{
	"flux-schnell":       {Name: "flux-schnell", PriceMicros: 3_000},
	"flux-dev":           {Name: "flux-dev", PriceMicros: 25_000},
	"flux-pro-1.1":       {Name: "flux-pro-1.1", PriceMicros: 40_000},
	"flux-pro-1.1-ultra": {Name: "flux-pro-1.1-ultra", PriceMicros: 60_000, SizeOptional: true},
}

// Job is one accepted generation task.
type Job struct {
	ID     string `json:"id"`
	Model  string `json:"model"`
	Prompt string `json:"prompt"`
	Seed   int64  `json:"seed"`
	Width  int    `json:"width,omitempty"`  // 0 when not requested
	Height int    `json:"height,omitempty"` // 0 when not requested
	Format string `json:"output_format"`
	// IdempotencyKey is the key this job answers to; empty when the submit had none or
	// idempotency was off.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// RequestHash is the hex SHA-256 of the model, a zero byte and the canonical JSON body
	// without its webhook fields: what a later submit under the same key must match.
	RequestHash string    `json:"request_hash"`
	CreatedAt   time.Time `json:"created_at"`
	// RenderedAt is when the job finishes rendering: CreatedAt plus the render time in force
	// when it was accepted, so a restart with another --render-time does not move it. Jobs
	// journaled before render times existed have none; they are replayed as rendered at once.
	RenderedAt time.Time `json:"rendered_at,omitzero"`
	// Webhook is where to report the job once rendered; the zero value when the submit named
	// none.
	Webhook Webhook `json:"webhook,omitzero"`
}

// Webhook is a submit's webhook_url and webhook_secret.
type Webhook struct {
	URL    string `json:"url"`
	Secret Secret `json:"secret"`
}

// Secret is a webhook secret. It is journaled as written (a restarted mockflux must still
// sign with it) but prints as [redacted] through fmt and slog, so that no log line can carry
// it by accident.
type Secret string

const redacted = "[redacted]"

func (Secret) String() string       { return redacted }
func (Secret) GoString() string     { return redacted }
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// Limits of the webhook fields, in bytes.
const (
	MaxWebhookURL    = 2048
	MinWebhookSecret = 16
	MaxWebhookSecret = 256
)

// Charge is money taken for one job.
type Charge struct {
	ID           string `json:"id"`
	JobID        string `json:"job_id"`
	Model        string `json:"model"`
	AmountMicros int64  `json:"amount_micros"`
	// IdempotencyKey is the key the submit carried, also when it was ignored.
	IdempotencyKey *string   `json:"idempotency_key"`
	CreatedAt      time.Time `json:"created_at"`
	// ReadyAt is when the charge's job became Ready, zero while not known. It is worked out
	// when the charges are listed (Provider.Charges), never journaled: it depends on polls,
	// which are not.
	ReadyAt time.Time `json:"-"`
}

// Code classifies an Error; package httpserver maps each to an HTTP status.
type Code string

// Error codes.
const (
	CodeNotFound  Code = "not_found"  // an unknown model
	CodeInvalid   Code = "invalid"    // a request that fails validation
	CodeKeyReused Code = "key_reused" // an Idempotency-Key already used for another request
	CodeInternal  Code = "internal"   // mockflux could not record the charge
)

// Error is mockflux's one error type. Detail is safe to show the client.
type Error struct {
	Code   Code
	Detail string
}

func (e *Error) Error() string { return e.Detail }

func errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// ErrorCode returns err's code, CodeInternal for errors of other types.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}
