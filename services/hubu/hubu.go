// Package hubu holds the domain of the Hubu authorization service: operations and their
// states, the principals that call it, the executor it hands decisions to, and its one error
// type. The packages beside it implement storage (postgres), policy, the lifecycle of a
// decision (lifecycle) and the HTTP API (httpserver).
package hubu

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/proto/contract"
)

// State is where an operation stands. The final states never change again.
type State string

const (
	StatePendingApproval State = "pending_approval" // held; waits for a human
	StateApproved        State = "approved"         // a human approved it; waits for the agent's resume
	StateDispatching     State = "dispatching"      // decision issued; being handed to the executor
	StateExecuting       State = "executing"        // the executor has accepted the decision
	StateSucceeded       State = "succeeded"
	StateFailed          State = "failed"
	StateDenied          State = "denied"
	StateExpired         State = "expired"
)

// Final reports whether the state can no longer change; a final operation holds no budget.
func (s State) Final() bool {
	switch s {
	case StateSucceeded, StateFailed, StateDenied, StateExpired:
		return true
	}
	return false
}

// The spend tools Hubu prices.
const (
	ToolGenerateImage = "generate_image"
	ToolEditImage     = "edit_image"
)

// ProviderBFL is Black Forest Labs, the FLUX provider.
const ProviderBFL = "bfl"

// Scope is what a decision is bound to: the executor must run exactly this.
type Scope struct {
	Provider string
	Model    string
	Size     string // "<width>x<height>", or "<w>:<h>" for a model sized by aspect ratio (contract.ImageRequest.ResolveSize)
}

// ImageRequest is a validated generate_image request.
type ImageRequest = contract.ImageRequest

// AuthorizeRequest is what the router sends for a new or re-delivered spend call.
type AuthorizeRequest struct {
	OperationKey string // private; never logged, never returned
	PublicHandle string
	Tool         string
	RequestHash  string
	Arguments    ImageRequest
	// Inputs are the sizes of an edit's input images, in the order of Arguments.InputImages:
	// what its price and its default size are made from. Hubu reads them (from Gongbu) only for
	// a new operation: a redelivery is compared as it was written.
	Inputs []contract.Dimensions
}

// Denial says why an operation was refused by policy.
type Denial struct {
	Code    string // "denied" or "budget_exceeded"
	Message string
}

// Denial codes.
const (
	DenialDenied         = "denied"
	DenialBudgetExceeded = "budget_exceeded"
)

// Operation is one authorization record. It never carries the private operation key.
type Operation struct {
	ID                uuid.UUID
	AgentID           uuid.UUID
	PublicHandle      string
	Tool              string
	Arguments         json.RawMessage
	RequestHash       string
	Account           string
	Scope             Scope
	AmountMicros      int64
	Currency          string
	State             State
	DecisionID        *uuid.UUID
	Denial            *Denial
	ApprovalExpiresAt *time.Time
	DecidedBy         *string
	DecidedAt         *time.Time // when a person approved or denied it, or it expired
	FailureReason     *string
	// ProviderCostMicros is what the provider stated the execution cost, as the executor
	// reported it with the settle; above AmountMicros only when the provider charged more than
	// was held (what was captured is then the hold).
	ProviderCostMicros *int64
	HeldMicros         int64
	CapturedMicros     int64
	ReleasedMicros     int64
	// DecisionIssuedAt is when the decision was issued: when the operation was approved by
	// policy (its creation) or by a person. Zero without a decision.
	DecisionIssuedAt time.Time
	// DispatchAttempts counts the tries to hand the decision to the executor (see lifecycle).
	DispatchAttempts int
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// Decision is what Hubu hands to the executor once an operation is approved.
type Decision struct {
	DecisionID   uuid.UUID
	PublicHandle string
	AgentID      uuid.UUID
	Tool         string
	Scope        Scope
	Arguments    json.RawMessage
	AmountMicros int64
	Currency     string
	IssuedAt     time.Time // see Operation.DecisionIssuedAt
	State        State     // the operation's, when the decision was read from it
}

// DecisionOf returns the decision of an approved operation.
func DecisionOf(op Operation) (Decision, bool) {
	if op.DecisionID == nil {
		return Decision{}, false
	}
	return Decision{
		DecisionID:   *op.DecisionID,
		PublicHandle: op.PublicHandle,
		AgentID:      op.AgentID,
		Tool:         op.Tool,
		Scope:        op.Scope,
		Arguments:    op.Arguments,
		AmountMicros: op.AmountMicros,
		Currency:     op.Currency,
		IssuedAt:     op.DecisionIssuedAt,
		State:        op.State,
	}, true
}

// Executor runs decisions. Execute returns nil once the executor has durably accepted the
// decision; it must be idempotent per DecisionID, because Hubu re-sends a decision whenever
// it cannot be sure the executor has it. The outcome comes back later through settle or
// release.
type Executor interface {
	Execute(ctx context.Context, d Decision) error
}

// Images reads the images the executor keeps for operations, for Hubu's operators (hubuctl
// image, the console) and for agents reading their own.
type Images interface {
	// Image returns the image kept for the operation of handle, or its preview; a not_found
	// *Error when there is none.
	Image(ctx context.Context, handle string, preview bool) (KeptImage, error)
	// ImageSize returns the sides of the image kept for the execution of a decision: an edit's
	// price and default size are made from its inputs'. A not_found *Error when the executor
	// keeps no image for it, or does not know its sides.
	ImageSize(ctx context.Context, decisionID uuid.UUID) (contract.Dimensions, error)
}

// KeptImage is an image the executor keeps.
type KeptImage struct {
	MIMEType string
	Bytes    []byte
	// ETag is the executor's entity tag for it (the quoted hex SHA-256).
	ETag string
}

// Role is what a credential may do.
type Role string

const (
	RoleAgent    Role = "agent"
	RoleOperator Role = "operator"
	RoleService  Role = "service"
	// RoleRouter is a router's credential in OAuth mode: it reads token introspections, and
	// acts as an agent only for the OAuth grant a request names (contract.GrantHeader).
	RoleRouter Role = "router"
)

// Principal is the authenticated caller. AgentID is set only for agents, and it is the
// only source of an operation's agent. CredentialID names the credential it presented, which
// is what an operator's revocations and rotations are recorded under.
type Principal struct {
	Role         Role
	Name         string
	AgentID      uuid.UUID
	CredentialID uuid.UUID
}

// LedgerEntry is one append-only movement of an operation's money.
type LedgerEntry struct {
	ID           int64
	Kind         string // LedgerHold, LedgerCapture or LedgerRelease
	AmountMicros int64
	Currency     string
	CreatedAt    time.Time
}

// Ledger entry kinds.
const (
	LedgerHold    = "hold"
	LedgerCapture = "capture"
	LedgerRelease = "release"
)

// BudgetDelta is what e adds to its agent's budget use, which counts what operations hold
// and what they captured: a capture turns held money into spent money and adds nothing.
func (e LedgerEntry) BudgetDelta() int64 {
	switch e.Kind {
	case LedgerHold:
		return e.AmountMicros
	case LedgerRelease:
		return -e.AmountMicros
	}
	return 0
}

// Policy is an agent's spending policy.
type Policy struct {
	Currency                  string
	PerOperationCeilingMicros int64
	AutoApproveLimitMicros    int64
	BudgetMicros              int64
	BudgetPeriod              string // day, week, month
	AllowedProviders          []string
	AllowedModels             []string
}

// DefaultPolicy is given to an agent created without one: auto-approve up to $0.05 an
// operation, a ceiling of $1.00 an operation, $5.00 a day, every catalog model.
func DefaultPolicy() Policy {
	return Policy{
		Currency:                  "USD",
		PerOperationCeilingMicros: 1_000_000,
		AutoApproveLimitMicros:    50_000,
		BudgetMicros:              5_000_000,
		BudgetPeriod:              "day",
		AllowedProviders:          []string{"*"},
		AllowedModels:             []string{"*"},
	}
}

// Agent is an agent with its policy.
type Agent struct {
	ID        uuid.UUID
	Name      string
	Account   string
	Policy    Policy
	CreatedAt time.Time
	// OwnerEmail is the person the agent belongs to, as the team's OpenID Connect provider
	// verifies them; "" when none is named.
	OwnerEmail string
}

// Price is one catalog entry.
type Price struct {
	Provider string
	Model    string
	Size     string // "<width>x<height>", "<w>:<h>" or "*"
	// Rule is PriceFlat or PriceMegapixel (see AmountFor).
	Rule string
	// AmountMicros is a flat price's amount for an image, a per-megapixel price's for the
	// first megapixel of output.
	AmountMicros int64
	// ExtraMPMicros and InputMPMicros are a per-megapixel price's for each further megapixel
	// of output and for each megapixel of the input images.
	ExtraMPMicros int64
	InputMPMicros int64
	Currency      string
	UpdatedAt     time.Time
}

// Budget is an agent's use of its current budget period.
type Budget struct {
	Period          string
	PeriodStart     time.Time
	LimitMicros     int64
	UsedMicros      int64
	RemainingMicros int64
	Currency        string
}

// Capabilities is what an agent may do now.
type Capabilities struct {
	Agent  Agent
	Prices []Price
	Budget Budget
}
