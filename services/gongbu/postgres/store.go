package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/sql/gongbu/gongbudb"
)

// Store is Gongbu's PostgreSQL storage.
type Store struct {
	pool *pgxpool.Pool
	q    *gongbudb.Queries
}

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool, q: gongbudb.New()} }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// Insert records a decision as submitting, under a lease that makes the caller its only
// worker, and returns the database's epoch as the insert read it: whether "no row until now"
// is evidence that no executor ever submitted the decision (gongbu.Issued.PossiblySubmitted).
// created is false when the decision was recorded before; the existing row is returned,
// nothing changes, and epoch is the zero Epoch.
func (s *Store) Insert(ctx context.Context, d gongbu.Decision, vendorKey string, leaseUntil, now time.Time) (exec gongbu.Execution, epoch gongbu.Epoch, created bool, err error) {
	next := gongbu.Accept(d, vendorKey, now)
	args, err := json.Marshal(next.Arguments)
	if err != nil {
		return gongbu.Execution{}, gongbu.Epoch{}, false, err
	}
	row, err := s.q.InsertExecution(ctx, s.pool, gongbudb.InsertExecutionParams{
		DecisionID: next.DecisionID, PublicHandle: next.PublicHandle, AgentID: next.AgentID, Provider: next.Scope.Provider,
		Model: next.Scope.Model, Size: next.Scope.Size, Arguments: args, AmountMicros: next.AmountMicros, Currency: next.Currency,
		VendorKey: next.VendorKey, State: string(next.State), LeaseUntil: leaseUntil, CreatedAt: next.CreatedAt,
	})
	if isNoRows(err) {
		existing, err := s.Get(ctx, d.DecisionID)
		if gongbu.ErrorCode(err) == gongbu.CodeNotFound {
			// Neither inserted nor there before: the database has lost its epoch row.
			return gongbu.Execution{}, gongbu.Epoch{}, false, errors.New("insert execution: the database has no epoch (database_epoch is empty); nothing was recorded")
		}
		return existing, gongbu.Epoch{}, false, err
	}
	// ON CONFLICT (decision_id) covers only the primary key. When two requests for one
	// decision race, the loser can find the winner's row through another unique index first
	// and fail with its violation instead: that is the same decision, not a conflict.
	if uniqueViolation(err, "executions_public_handle_key") || uniqueViolation(err, "executions_vendor_key_key") {
		existing, getErr := s.Get(ctx, d.DecisionID)
		if getErr == nil {
			return existing, gongbu.Epoch{}, false, nil
		}
		if gongbu.ErrorCode(getErr) != gongbu.CodeNotFound {
			return gongbu.Execution{}, gongbu.Epoch{}, false, getErr
		}
		return gongbu.Execution{}, gongbu.Epoch{}, false, gongbu.Errorf(gongbu.CodeDecisionMismatch, "another decision was executed for this public handle")
	}
	if err != nil {
		return gongbu.Execution{}, gongbu.Epoch{}, false, fmt.Errorf("insert execution: %w", err)
	}
	exec, err = executionOf(row.Execution)
	return exec, gongbu.Epoch{ID: row.EpochID, BeganAt: row.EpochBeganAt}, true, err
}

// Get returns the execution of a decision.
func (s *Store) Get(ctx context.Context, id uuid.UUID) (gongbu.Execution, error) {
	row, err := s.q.GetExecution(ctx, s.pool, id)
	if isNoRows(err) {
		return gongbu.Execution{}, gongbu.Errorf(gongbu.CodeNotFound, "no execution for decision %s", id)
	}
	if err != nil {
		return gongbu.Execution{}, fmt.Errorf("get execution: %w", err)
	}
	return executionOf(row)
}

// GetByHandle returns the execution of an operation by its public handle.
func (s *Store) GetByHandle(ctx context.Context, handle string) (gongbu.Execution, error) {
	row, err := s.q.GetExecutionByHandle(ctx, s.pool, handle)
	if isNoRows(err) {
		return gongbu.Execution{}, gongbu.Errorf(gongbu.CodeNotFound, "no execution for that operation")
	}
	if err != nil {
		return gongbu.Execution{}, fmt.Errorf("get execution: %w", err)
	}
	return executionOf(row)
}

// GetByHandleWithImage is GetByHandle with what an answer embeds of a succeeded execution's
// kept image: the image when it is no larger than limit bytes, else its preview when that is
// no larger (nil otherwise: not succeeded, both larger, or not kept), read in the same
// statement as the execution that describes it.
func (s *Store) GetByHandleWithImage(ctx context.Context, handle string, limit int64) (gongbu.Execution, *gongbu.Embedded, error) {
	row, err := s.q.GetExecutionWithImageByHandle(ctx, s.pool, gongbudb.GetExecutionWithImageByHandleParams{
		PublicHandle: handle, EmbedLimit: int32(min(limit, gongbu.MaxImageBytes)),
	})
	if isNoRows(err) {
		return gongbu.Execution{}, nil, gongbu.Errorf(gongbu.CodeNotFound, "no execution for that operation")
	}
	if err != nil {
		return gongbu.Execution{}, nil, fmt.Errorf("get execution: %w", err)
	}
	exec, err := executionOf(row.Execution)
	switch {
	case row.Image != nil:
		return exec, &gongbu.Embedded{Bytes: row.Image}, err
	case row.Preview != nil:
		return exec, &gongbu.Embedded{Bytes: row.Preview, Preview: true}, err
	}
	return exec, nil, err
}

// GetByJob returns the execution whose provider job is jobID.
func (s *Store) GetByJob(ctx context.Context, provider, jobID string) (gongbu.Execution, error) {
	row, err := s.q.GetExecutionByJob(ctx, s.pool, gongbudb.GetExecutionByJobParams{Provider: provider, ProviderJobID: &jobID})
	if isNoRows(err) {
		return gongbu.Execution{}, gongbu.Errorf(gongbu.CodeNotFound, "no execution for that job")
	}
	if err != nil {
		return gongbu.Execution{}, fmt.Errorf("get execution: %w", err)
	}
	return executionOf(row)
}

// List returns every execution, oldest first.
func (s *Store) List(ctx context.Context) ([]gongbu.Execution, error) {
	rows, err := s.q.ListExecutions(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("list executions: %w", err)
	}
	return executionsOf(rows)
}

// Open is an execution whose lease ran out: its worker crashed, or it waits for its next poll.
type Open struct {
	DecisionID uuid.UUID
	State      gongbu.State
}

// ListClaimable returns open executions whose lease ended by now.
func (s *Store) ListClaimable(ctx context.Context, now time.Time, limit int32) ([]Open, error) {
	rows, err := s.q.ListClaimable(ctx, s.pool, gongbudb.ListClaimableParams{LeaseUntil: now, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("list claimable: %w", err)
	}
	out := make([]Open, 0, len(rows))
	for _, r := range rows {
		out = append(out, Open{DecisionID: r.DecisionID, State: gongbu.State(r.State)})
	}
	return out, nil
}

// Claim takes the lease of an open execution still in state whose lease ended; ok is false
// when another worker holds it or it moved on.
func (s *Store) Claim(ctx context.Context, id uuid.UUID, state gongbu.State, leaseUntil, now time.Time) (gongbu.Execution, bool, error) {
	if err := gongbu.CheckMove(state, gongbu.EventClaim, state); err != nil {
		return gongbu.Execution{}, false, err
	}
	row, err := s.q.ClaimExecution(ctx, s.pool, gongbudb.ClaimExecutionParams{DecisionID: id, State: string(state), LeaseUntil: leaseUntil, Now: now})
	if isNoRows(err) {
		return gongbu.Execution{}, false, nil
	}
	if err != nil {
		return gongbu.Execution{}, false, fmt.Errorf("claim execution: %w", err)
	}
	e, err := executionOf(row)
	return e, err == nil, err
}

// ClaimSubmitted takes the lease of a submitted execution now, even from a worker that holds
// it: a poll is a read, and the fence on every outcome write keeps the worker that lost the
// lease from recording anything. ok is false when the execution is no longer submitted.
func (s *Store) ClaimSubmitted(ctx context.Context, id uuid.UUID, leaseUntil, now time.Time) (gongbu.Execution, bool, error) {
	row, err := s.q.ClaimSubmitted(ctx, s.pool, gongbudb.ClaimSubmittedParams{DecisionID: id, LeaseUntil: leaseUntil, Now: now})
	if isNoRows(err) {
		return gongbu.Execution{}, false, nil
	}
	if err != nil {
		return gongbu.Execution{}, false, fmt.Errorf("claim execution: %w", err)
	}
	e, err := executionOf(row)
	return e, err == nil, err
}

// MarkSubmitted records the provider's job; the poller may take it from nextPoll on. The
// write is fenced by exec's lease: gongbu.ErrLeaseLost when another worker took it over.
func (s *Store) MarkSubmitted(ctx context.Context, exec gongbu.Execution, job gongbu.Job, pollDeadline, nextPoll, now time.Time) (gongbu.Execution, error) {
	next, err := exec.Submit(job, pollDeadline, now)
	if err != nil {
		return gongbu.Execution{}, err
	}
	row, err := s.q.MarkSubmitted(ctx, s.pool, gongbudb.MarkSubmittedParams{
		DecisionID: exec.DecisionID, LeaseGeneration: exec.LeaseGeneration, State: string(next.State), ProviderJobID: next.ProviderJobID,
		PollingUrl: next.PollingURL, ProviderCostMicros: next.ProviderCostMicros, PollDeadline: next.PollDeadline, LeaseUntil: nextPoll, Now: next.UpdatedAt,
	})
	if isNoRows(err) {
		return gongbu.Execution{}, gongbu.ErrLeaseLost
	}
	if err != nil {
		return gongbu.Execution{}, fmt.Errorf("mark submitted: %w", err)
	}
	return executionOf(row)
}

// ExtendLease keeps an open execution to the worker holding exec's lease until leaseUntil;
// gongbu.ErrLeaseLost when another worker took it over.
//
// The extension commits without waiting for the disk (synchronous_commit off, for its own
// statement only, in one round trip): a lease is a claim on work, not a record of money. Should a crash lose
// it, the shorter lease before it stands, another worker may take the execution over sooner,
// and the fence (the lease generation, which an extension does not change) still decides
// who writes. That spares every pending poll, and every download of a result, a flush.
func (s *Store) ExtendLease(ctx context.Context, exec gongbu.Execution, leaseUntil, now time.Time) error {
	// On the pool, never in a transaction: the query turns synchronous_commit off for the
	// whole transaction it runs in.
	_, err := s.q.ExtendLease(ctx, s.pool, gongbudb.ExtendLeaseParams{
		DecisionID: exec.DecisionID, LeaseGeneration: exec.LeaseGeneration, LeaseUntil: leaseUntil, Now: now,
	})
	if isNoRows(err) {
		return gongbu.ErrLeaseLost
	}
	if err != nil {
		return fmt.Errorf("extend lease: %w", err)
	}
	return nil
}

// Finish moves an open execution to its final outcome. The write is fenced by exec's lease:
// gongbu.ErrLeaseLost, and nothing written, when another worker took the execution over or
// it is final already.
func (s *Store) Finish(ctx context.Context, exec gongbu.Execution, o gongbu.Outcome, now time.Time) (gongbu.Execution, error) {
	next, err := exec.Finish(o, now)
	if err != nil {
		return gongbu.Execution{}, err
	}
	params := gongbudb.FinishExecutionParams{
		DecisionID: exec.DecisionID, LeaseGeneration: exec.LeaseGeneration, State: string(next.State),
		ResultUrl: next.ResultURL, Error: next.Error, ChargedMicros: next.ChargedMicros, Now: next.UpdatedAt,
	}
	if o.Image != nil {
		c := imageColumnsOf(*o.Image)
		params.ImageMimeType, params.ImageSha256, params.ImageSize, params.ImageWidth, params.ImageHeight = c.mimeType, c.sha256, c.size, c.width, c.height
		params.PreviewSha256, params.PreviewSize, params.PreviewWidth, params.PreviewHeight = c.previewSHA256, c.previewSize, c.previewWidth, c.previewHeight
		params.Image, params.Preview = c.image, c.preview
	}
	row, err := s.q.FinishExecution(ctx, s.pool, params)
	if isNoRows(err) {
		return gongbu.Execution{}, gongbu.ErrLeaseLost
	}
	if err != nil {
		return gongbu.Execution{}, fmt.Errorf("finish execution: %w", err)
	}
	return executionOf(gongbudb.Execution(row))
}

// Epoch returns since when this database has kept an unbroken record of its executions.
func (s *Store) Epoch(ctx context.Context) (gongbu.Epoch, error) {
	row, err := s.q.GetDatabaseEpoch(ctx, s.pool)
	if err != nil {
		return gongbu.Epoch{}, fmt.Errorf("database epoch: %w", err)
	}
	return gongbu.Epoch{ID: row.ID, BeganAt: row.BeganAt}, nil
}

// RenewEpoch starts a new epoch now: run after the database was restored from a backup, whose
// record of recent executions may be incomplete.
func (s *Store) RenewEpoch(ctx context.Context) (gongbu.Epoch, error) {
	row, err := s.q.RenewDatabaseEpoch(ctx, s.pool)
	if err != nil {
		return gongbu.Epoch{}, fmt.Errorf("renew the database epoch: %w", err)
	}
	return gongbu.Epoch{ID: row.ID, BeganAt: row.BeganAt}, nil
}

// ListUnreported returns final executions whose outcome Hubu has not been told.
func (s *Store) ListUnreported(ctx context.Context, limit int32) ([]gongbu.Execution, error) {
	rows, err := s.q.ListUnreported(ctx, s.pool, limit)
	if err != nil {
		return nil, fmt.Errorf("list unreported: %w", err)
	}
	return executionsOf(rows)
}

// DeferReport moves an outcome Hubu did not take to the back of ListUnreported, so that a
// few reports that keep failing cannot hold back the others.
func (s *Store) DeferReport(ctx context.Context, id uuid.UUID, now time.Time) error {
	if err := s.q.DeferReport(ctx, s.pool, gongbudb.DeferReportParams{DecisionID: id, UpdatedAt: now}); err != nil {
		return fmt.Errorf("defer report: %w", err)
	}
	return nil
}

// Resolve records an operator's verdict on an indeterminate execution (gongbu.Execution.Resolve).
func (s *Store) Resolve(ctx context.Context, id uuid.UUID, charged int64, now time.Time) (gongbu.Execution, error) {
	cur, err := s.Get(ctx, id)
	if err != nil {
		return gongbu.Execution{}, err
	}
	next, err := cur.Resolve(charged, now)
	if err != nil {
		return gongbu.Execution{}, err
	}
	row, err := s.q.ResolveExecution(ctx, s.pool, gongbudb.ResolveExecutionParams{
		DecisionID: id, State: string(next.State), ChargedMicros: next.ChargedMicros, Error: next.Error, Now: next.ResolvedAt,
	})
	if isNoRows(err) {
		return gongbu.Execution{}, gongbu.Errorf(gongbu.CodeInvalidArguments, "the execution of decision %s changed meanwhile; look again", id)
	}
	if err != nil {
		return gongbu.Execution{}, fmt.Errorf("resolve execution: %w", err)
	}
	return executionOf(row)
}

// ResumeJob records an operator's verdict that the provider took an indeterminate execution's
// job (gongbu.Execution.ResumeJob). A job that another execution has is refused.
func (s *Store) ResumeJob(ctx context.Context, id uuid.UUID, job gongbu.Job, pollDeadline, now time.Time) (gongbu.Execution, error) {
	cur, err := s.Get(ctx, id)
	if err != nil {
		return gongbu.Execution{}, err
	}
	next, err := cur.ResumeJob(job, pollDeadline, now)
	if err != nil {
		return gongbu.Execution{}, err
	}
	if other, err := s.GetByJob(ctx, cur.Scope.Provider, job.ID); err == nil {
		return gongbu.Execution{}, gongbu.Errorf(gongbu.CodeInvalidArguments, "job %s is the job of decision %s already", job.ID, other.DecisionID)
	} else if gongbu.ErrorCode(err) != gongbu.CodeNotFound {
		return gongbu.Execution{}, err
	}
	row, err := s.q.ResumeJob(ctx, s.pool, gongbudb.ResumeJobParams{
		DecisionID: id, ProviderJobID: next.ProviderJobID, PollingUrl: next.PollingURL, PollDeadline: next.PollDeadline, Now: now,
	})
	if isNoRows(err) {
		return gongbu.Execution{}, gongbu.Errorf(gongbu.CodeInvalidArguments, "the execution of decision %s changed meanwhile; look again", id)
	}
	if err != nil {
		return gongbu.Execution{}, fmt.Errorf("resume job: %w", err)
	}
	return executionOf(row)
}

// MarkReported records that Hubu has the outcome.
//
// The record commits without waiting for the disk (synchronous_commit off, for its own
// statement only): it is no evidence of what was sent or charged, only a note that the
// report need not be sent again. Should a crash of Postgres lose it, the outcome is listed
// unreported and reported again, and Hubu answers a repeated settle or release with the
// outcome it took the first time.
func (s *Store) MarkReported(ctx context.Context, id uuid.UUID, now time.Time) error {
	// On the pool, never in a transaction (see the query).
	if err := s.q.MarkReported(ctx, s.pool, gongbudb.MarkReportedParams{DecisionID: id, ReportedAt: &now}); err != nil {
		return fmt.Errorf("mark reported: %w", err)
	}
	return nil
}

func executionOf(r gongbudb.Execution) (gongbu.Execution, error) {
	var args gongbu.ImageArguments
	if err := json.Unmarshal(r.Arguments, &args); err != nil {
		return gongbu.Execution{}, fmt.Errorf("decode arguments of %s: %w", r.DecisionID, err)
	}
	return gongbu.Execution{
		Decision: gongbu.Decision{
			DecisionID: r.DecisionID, PublicHandle: r.PublicHandle, AgentID: r.AgentID, Tool: gongbu.ToolOf(args),
			Scope:     gongbu.Scope{Provider: r.Provider, Model: r.Model, Size: r.Size},
			Arguments: args, AmountMicros: r.AmountMicros, Currency: r.Currency,
		},
		VendorKey: r.VendorKey, State: gongbu.State(r.State), ProviderJobID: r.ProviderJobID, PollingURL: r.PollingUrl,
		ResultURL: r.ResultUrl, Error: r.Error, ProviderCostMicros: r.ProviderCostMicros, ChargedMicros: r.ChargedMicros, Reported: r.ReportedAt != nil,
		Attempts: int(r.Attempts), LeaseGeneration: r.LeaseGeneration, PollDeadline: r.PollDeadline, ResolvedAt: r.ResolvedAt, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		Image: imageInfoOf(r),
	}, nil
}

func imageInfoOf(r gongbudb.Execution) *gongbu.ImageInfo {
	if r.ImageMimeType == nil || r.ImageSize == nil || len(r.ImageSha256) != sha256.Size {
		return nil
	}
	info := gongbu.ImageInfo{MIMEType: *r.ImageMimeType, Size: int(*r.ImageSize), Width: intOf(r.ImageWidth), Height: intOf(r.ImageHeight)}
	copy(info.SHA256[:], r.ImageSha256)
	if r.PreviewSize != nil && len(r.PreviewSha256) == sha256.Size {
		p := &gongbu.PreviewInfo{Size: int(*r.PreviewSize), Width: intOf(r.PreviewWidth), Height: intOf(r.PreviewHeight)}
		copy(p.SHA256[:], r.PreviewSha256)
		info.Preview = p
	}
	return &info
}

func intOf(p *int32) int {
	if p == nil {
		return 0
	}
	return int(*p)
}

// imageColumns are the columns that keep an image and describe it.
type imageColumns struct {
	mimeType                                 *string
	sha256, image, previewSHA256, preview    []byte
	size, width, height                      *int32
	previewSize, previewWidth, previewHeight *int32
}

func imageColumnsOf(img gongbu.Image) imageColumns {
	info := img.Info()
	n := func(v int) *int32 {
		if v == 0 {
			return nil
		}
		i := int32(v)
		return &i
	}
	c := imageColumns{mimeType: &info.MIMEType, sha256: info.SHA256[:], image: img.Bytes, size: n(info.Size), width: n(info.Width), height: n(info.Height)}
	if p := info.Preview; p != nil {
		c.previewSHA256, c.preview = p.SHA256[:], img.Preview.Bytes
		c.previewSize, c.previewWidth, c.previewHeight = n(p.Size), n(p.Width), n(p.Height)
	}
	return c
}

func executionsOf(rows []gongbudb.Execution) ([]gongbu.Execution, error) {
	out := make([]gongbu.Execution, 0, len(rows))
	for _, r := range rows {
		e, err := executionOf(r)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}
