// Package gongbu holds the domain of the Gongbu executor: executions, the provider adapters
// they run through, Hubu as the authority that issues decisions, and Gongbu's one error type.
// Gongbu turns one decision into at most one paid provider call.
package gongbu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/proto/decisionsig"

	"hubu.dev/hubu/proto/contract"
)

// Scope is what a decision is bound to.
type Scope struct {
	Provider string
	Model    string
	Size     string
}

// ImageArguments is a generate_image request as Hubu recorded it.
type ImageArguments = contract.ImageRequest

// Charge is what to capture for an execution whose job the provider took: what the provider
// stated the job costs where it stated one in the decision's currency (US dollars: BFL's
// credits), never more than the decision's amount; else the decision's amount. above says the
// provider stated more than was held: the difference is the operator's to raise with it.
func (e Execution) Charge() (charged int64, above bool) {
	if e.ProviderCostMicros == nil || e.Currency != "USD" {
		return e.AmountMicros, false
	}
	return min(*e.ProviderCostMicros, e.AmountMicros), *e.ProviderCostMicros > e.AmountMicros
}

// Decision is what Hubu issued and Gongbu executes.
type Decision struct {
	DecisionID   uuid.UUID
	PublicHandle string
	AgentID      uuid.UUID
	Tool         string
	Scope        Scope
	Arguments    ImageArguments
	AmountMicros int64
	Currency     string
	// Inputs are an edit's input images, in the order of Arguments.InputImages: read from the
	// images Gongbu keeps for each submission, never stored with the decision.
	Inputs []Image
}

// The spend tools.
const (
	ToolGenerateImage = "generate_image"
	ToolEditImage     = "edit_image"
)

// ToolOf is the tool a decision's arguments are for: an edit names input images, a generation
// never does (contract.ImageRequest.Check), so the arguments Gongbu stores say which it was.
func ToolOf(args ImageArguments) string {
	if len(args.InputImages) > 0 {
		return ToolEditImage
	}
	return ToolGenerateImage
}

// SameWork reports whether two decisions ask for exactly the same paid work.
func (d Decision) SameWork(o Decision) bool {
	a, _ := json.Marshal(d.Arguments)
	b, _ := json.Marshal(o.Arguments)
	return d.DecisionID == o.DecisionID && d.PublicHandle == o.PublicHandle && d.AgentID == o.AgentID &&
		d.Tool == o.Tool && d.Scope == o.Scope && string(a) == string(b) &&
		d.AmountMicros == o.AmountMicros && d.Currency == o.Currency
}

// Issued is a decision as Hubu reports it when asked: what it issued, when, and the state of
// its operation.
type Issued struct {
	Decision
	State    string
	IssuedAt time.Time
}

// Epoch is since when Gongbu's database has kept an unbroken record of every execution it
// accepted (a new database, or one restored from a backup, begins a new epoch).
type Epoch struct {
	ID      uuid.UUID
	BeganAt time.Time
}

// PossiblySubmitted reports whether an executor may have submitted this decision to the
// provider although the database of epoch has no record of it, and why. Gongbu records a
// decision before it calls a provider, so a decision it has no row for was never submitted,
// unless the row was lost: because Hubu saw an executor accept the decision (its operation is
// past dispatching), or because the decision is no younger than the database's unbroken record.
// A hand-off that failed on the way (a proxy's 502, a timeout, a crash of Hubu) is no
// evidence of a submission, however often it was re-sent. An epoch not read (its zero value)
// proves nothing either, so against it every decision is in doubt.
func (i Issued) PossiblySubmitted(e Epoch) (bool, string) {
	switch {
	case e.ID == uuid.Nil || e.BeganAt.IsZero():
		return true, "Gongbu does not know since when its database has kept its record, so it cannot tell that the decision was never submitted"
	case i.State != "dispatching":
		return true, fmt.Sprintf("Hubu saw an executor accept this decision (operation %s) but Gongbu has no record of it", i.State)
	case !i.IssuedAt.After(e.BeganAt):
		return true, "the decision was issued no later than Gongbu's database began its record (a new or restored database) and Gongbu has no record of it"
	}
	return false, ""
}

// Execution is Gongbu's record of one decision.
type Execution struct {
	Decision
	VendorKey     string
	State         State
	ProviderJobID *string
	PollingURL    *string
	PollDeadline  *time.Time
	ResultURL     *string
	// Image describes the result Gongbu keeps (nil: none, or not downloaded yet).
	Image *ImageInfo
	Error *string
	// ProviderCostMicros is what the provider stated the job costs (Job.CostMicros).
	ProviderCostMicros *int64
	ChargedMicros      *int64
	Reported           bool
	// Attempts counts the times a worker took the execution over (a takeover of a submission,
	// or a poll).
	Attempts int
	// LeaseGeneration names the lease this copy was read under; every write of an outcome
	// carries it and fails with ErrLeaseLost once another worker has claimed the execution.
	LeaseGeneration int64
	// ResolvedAt is set when an operator resolved the execution from indeterminate.
	ResolvedAt *time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Job is a provider's handle on submitted work.
type Job struct {
	ID         string
	PollingURL string
	// CostMicros is what the provider stated the job costs when it took it (BFL's cost, in
	// credits, as US micro-dollars); nil where it states none.
	CostMicros *int64
}

// PollStatus is what a provider says of a job.
type PollStatus int

const (
	JobPending PollStatus = iota
	JobReady
	JobFailed // the provider finished the job without a result
	JobLost   // the provider does not know the job
)

// PollResult is one poll's answer.
type PollResult struct {
	Status   PollStatus
	ImageURL string
	Detail   string
	// Uncharged says a failed job costs nothing: the provider charges none of its kind (BFL
	// charges only a task that is Ready: not a moderated one, nor one that failed).
	Uncharged bool
}

// Provider is a paid provider behind an adapter.
type Provider interface {
	// Name is the provider's name in scopes and vendor keys, e.g. "bfl".
	Name() string
	// HonoursIdempotencyKeys says whether re-submitting under the same key is guaranteed
	// to return the first job without a second charge. Only then may Gongbu resubmit after
	// a crash; otherwise an unfinished submission becomes indeterminate.
	HonoursIdempotencyKeys() bool
	// Submit sends the work under the idempotency key. A *Rejected error means the provider
	// refused this request; any other error leaves the outcome unknown. A refusal proves that
	// nothing was charged only when no earlier request under the key can have reached the
	// provider: Gongbu trusts it for a decision's first submission alone.
	Submit(ctx context.Context, key string, d Decision) (Job, error)
	// Poll asks for the job's state.
	Poll(ctx context.Context, job Job) (PollResult, error)
}

// Rejected is a provider's definite refusal of one request: that request charged nothing.
type Rejected struct{ Reason string }

func (r *Rejected) Error() string { return "provider rejected the request: " + r.Reason }

// IsRejected reports whether err is a definite refusal.
func IsRejected(err error) bool {
	var r *Rejected
	return errors.As(err, &r)
}

// Authority is Hubu as Gongbu sees it: the issuer of decisions and the keeper of holds.
type Authority interface {
	// Decision returns a decision Hubu issued, with the state of its operation and its count
	// of hand-offs; a decision Hubu does not know is a not_found *Error.
	Decision(ctx context.Context, id uuid.UUID) (Issued, error)
	// DecisionKeys returns the public keys Hubu signs decisions with (see decisionsig).
	DecisionKeys(ctx context.Context) ([]decisionsig.Key, error)
	// Settle captures amount of the decision's hold and releases the rest. The operation
	// succeeds, or, with failed, fails with reason: the provider charged for work it failed.
	// providerCost, where the provider stated one, is recorded beside the capture.
	Settle(ctx context.Context, id uuid.UUID, amount int64, failed bool, reason string, providerCost *int64) error
	// Release releases the decision's whole hold.
	Release(ctx context.Context, id uuid.UUID, reason string) error
	// Owns reports whether the operation with this handle belongs to the agent the caller's
	// credential acts as.
	Owns(ctx context.Context, caller Caller, publicHandle string) (bool, error)
}

// Caller is the credential a read came with: an agent's token, or a router's token with the
// OAuth grant it acts for (Hubu-Grant); Gongbu passes it to Hubu as it came.
type Caller struct {
	Token string
	Grant string // the Hubu-Grant header, "" when there is none
}

// Code is a stable error code.
type Code string

const (
	CodeInvalidArguments     Code = "invalid_arguments"
	CodeUnauthorized         Code = "unauthorized"
	CodeForbidden            Code = "forbidden"
	CodeNotFound             Code = "not_found"
	CodeMethodNotAllowed     Code = "method_not_allowed"
	CodeDecisionMismatch     Code = "decision_mismatch"
	CodePayloadTooLarge      Code = "payload_too_large"
	CodeUnsupportedMediaType Code = "unsupported_media_type"
	CodeInternal             Code = "internal"
	CodeUnavailable          Code = "unavailable"
)

// Error is Gongbu's one error type; Message is safe to show to the caller.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Errorf returns an *Error with a formatted, caller-safe message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err, or CodeInternal.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrorMessage returns the caller-safe message of err.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
