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

	"hubu.dev/hubu/proto/contract"
)

// Model is a FLUX model mockflux serves: the endpoint as BFL documents it (proto/contract) and
// what BFL charges for a task on it.
type Model struct {
	contract.Model
	Price Price
}

// Price is what BFL charges for a task, in micro-US-dollars (1 credit = $0.01 = 10,000 micros):
// flat, or (FLUX.2, when ExtraMPMicros or InputMPMicros is set) per megapixel of 2^20 pixels,
// FirstMPMicros for the first megapixel of output, ExtraMPMicros for each further one and
// InputMPMicros for each megapixel of the input images, each count rounded up (the inputs'
// together, each input at most 4 MP, as BFL shrinks a larger one). The rounding is Hubu's
// reading of BFL's answers (docs/bfl.md): mockflux charges as Hubu holds.
type Price struct {
	FirstMPMicros, ExtraMPMicros, InputMPMicros int64
}

// Cost is what a task of out pixels with inputs of these pixels costs at p.
func (p Price) Cost(out int64, inputs []int64) int64 {
	if p.ExtraMPMicros == 0 && p.InputMPMicros == 0 {
		return p.FirstMPMicros
	}
	var in int64
	for _, px := range inputs {
		in += min(px, 4*contract.Megapixel)
	}
	mp := func(px int64) int64 { return (px + contract.Megapixel - 1) / contract.Megapixel }
	return p.FirstMPMicros + max(mp(out)-1, 0)*p.ExtraMPMicros + mp(in)*p.InputMPMicros
}

// prices are BFL's published prices, as Hubu's default catalog has them.
var prices = map[string]Price{
	"flux-2-pro":         {30_000, 15_000, 15_000},
	"flux-2-max":         {70_000, 30_000, 30_000},
	"flux-2-flex":        {60_000, 60_000, 60_000},
	"flux-2-klein-4b":    {14_000, 1_000, 1_000},
	"flux-2-klein-9b":    {15_000, 2_000, 2_000},
	"flux-pro-1.1":       {FirstMPMicros: 40_000},
	"flux-pro-1.1-ultra": {FirstMPMicros: 60_000},
	"flux-dev":           {FirstMPMicros: 25_000},
	"flux-kontext-pro":   {FirstMPMicros: 40_000},
	"flux-kontext-max":   {FirstMPMicros: 80_000},
}

// Models are the models mockflux serves, by name: every model of the contract, at BFL's price.
var Models = func() map[string]Model {
	out := map[string]Model{}
	for _, m := range contract.Models {
		out[m.Name] = Model{Model: m, Price: prices[m.Name]}
	}
	return out
}()

// Job is one accepted generation task.
type Job struct {
	ID     string `json:"id"`
	Model  string `json:"model"`
	Prompt string `json:"prompt"`
	Seed   int64  `json:"seed"`
	// Width and Height are the size the job makes: the one asked for, or the model's (for a
	// model sized by aspect ratio, about its megapixels at the ratio). 0 in jobs journaled
	// before sizes were kept.
	Width  int    `json:"width,omitempty"`
	Height int    `json:"height,omitempty"`
	Format string `json:"output_format"`
	// InputPixels are the sizes, in pixels, of an edit's input images.
	InputPixels []int64 `json:"input_pixels,omitempty"`
	// CostMicros is what the job costs (its submit answer's cost, in micros).
	CostMicros int64 `json:"cost_micros,omitempty"`
	// Outcome is how the job ends: "" is Ready, else the status of an end without a result
	// (see SubmitRequest.Outcome), whose charge is refunded.
	Outcome string `json:"outcome,omitempty"`
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
	MaxWebhookURL    = 2083
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
	IdempotencyKey *string `json:"idempotency_key"`
	// Refunded says the job ended without a result and its charge was given back: it counts in
	// no total.
	Refunded  bool      `json:"refunded,omitempty"`
	CreatedAt time.Time `json:"created_at"`
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
	CodeNoCredits Code = "no_credits" // the account's credits do not cover the task (402)
	CodeTooMany   Code = "too_many"   // too many tasks at once (429)
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
