package httpserver

import (
	"cmp"
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/services/gongbu"
)

// DefaultWaitBackstop is how often a waiting request reads its execution again on its own: a
// lost notification costs at most this much latency.
const DefaultWaitBackstop = 2 * time.Second

// MaxWait is the longest a request may wait for an execution to change, in seconds.
const MaxWait = 30

// awaitOwned is awaitChange for a caller whose token may read the operation of handle
// (see requireOwner). The check with Hubu is a round trip of its own, so it runs beside the
// first read and the wait instead of before them: a long-poll whose execution is final by the
// time it arrives answers once both are done, not one after the other. Nothing that was read
// is answered before the check has passed, and a check that fails ends the wait at once, so
// the answer to a caller who may not read the operation is the same, and as soon, as it would
// be without the execution.
//
// Reads bring the image along (embed) only once the check has passed, so no image is ever
// read for a caller who may not see it. A read after a wait waits for the check first (it
// began before the wait, and has answered by then as a rule), so the read that finds the
// execution changed brings its image in the same statement; an execution found final by the
// first read, before the check answered, is read once more with its image.
//
// A refusal ends the wait, not a read already on its way to Postgres: that read finishes
// (a fraction of a millisecond as a rule) and its connection goes back to the pool. Cancelling
// it would make pgx close the connection, and a stream of refused callers would then cost
// Gongbu's pool, which hand-offs share, a new connection each.
func (s *Server) awaitOwned(r *http.Request, handle string, wait time.Duration, seen *gongbuapi.ExecutionState, embed int64) (gongbu.Execution, *gongbu.Embedded, error) {
	token, err := ownerToken(r, handle)
	if err != nil {
		return gongbu.Execution{}, nil, err
	}
	ctx := r.Context()
	if s.readCapable(r, token, handle) {
		// Hubu has already said yes, in the capability the router passed on.
		return s.awaitChange(ctx, handle, wait, seen, func(bool) int64 { return max(embed, 0) }, nil)
	}
	var owned atomic.Bool
	answered := make(chan struct{}) // closed once the check has answered, owned set before
	refused := make(chan struct{})  // closed, before answered, if the check did not pass
	checked := make(chan error, 1)
	go func() {
		err := s.checkOwner(ctx, token, handle)
		if err != nil {
			close(refused) // the wait is for nobody
		} else {
			owned.Store(true)
		}
		close(answered)
		checked <- err
	}()
	embedFor := func(afterWait bool) int64 {
		if embed <= 0 {
			return 0
		}
		if afterWait {
			select {
			case <-answered:
			case <-ctx.Done():
			}
		}
		if owned.Load() {
			return embed
		}
		return 0
	}
	exec, img, err := s.awaitChange(ctx, handle, wait, seen, embedFor, refused)
	if ownerErr := <-checked; ownerErr != nil {
		return gongbu.Execution{}, nil, ownerErr
	}
	if err == nil && img == nil && embeddable(exec, embed) {
		if again, withImage, err := s.Executions.Store.GetByHandleWithImage(r.Context(), handle, embed); err == nil {
			exec, img = again, withImage
		} else {
			// The image is a saving: without it the caller fetches it by GetOperationImage.
			s.logger().WarnContext(r.Context(), "cannot read a kept image to embed it", "public_handle", handle, "err", err)
		}
	}
	return exec, img, err
}

// embeddable reports whether exec's kept image, or else its preview, goes into an answer that
// embeds images of up to limit bytes.
func embeddable(exec gongbu.Execution, limit int64) bool {
	if limit <= 0 || exec.State != gongbu.StateSucceeded || exec.Image == nil {
		return false
	}
	return int64(exec.Image.Size) <= limit || (exec.Image.Preview != nil && int64(exec.Image.Preview.Size) <= limit)
}

// awaitChange reads the execution of handle, and while it does not exist, or is still in
// state seen, waits up to wait for it to change: woken by Changes the moment any replica
// records a change, and reading again every WaitBackstop besides. Each read brings the kept
// image of a succeeded execution along with it when it is no larger than embed(afterWait)
// bytes, as embed says for that read (0: no image); afterWait is false for the first. The
// wait ends early when stop is closed.
func (s *Server) awaitChange(ctx context.Context, handle string, wait time.Duration, seen *gongbuapi.ExecutionState, embed func(afterWait bool) int64, stop <-chan struct{}) (gongbu.Execution, *gongbu.Embedded, error) {
	afterWait := false
	read := func() (gongbu.Execution, *gongbu.Embedded, error) {
		if limit := embed(afterWait); limit > 0 {
			return s.Executions.Store.GetByHandleWithImage(ctx, handle, limit)
		}
		exec, err := s.Executions.Store.GetByHandle(ctx, handle)
		return exec, nil, err
	}
	if wait <= 0 {
		return read()
	}
	var woken <-chan struct{}
	if s.Changes != nil {
		var unsubscribe func()
		woken, unsubscribe = s.Changes.Subscribe(handle) // before the read: no change goes unseen
		defer unsubscribe()
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	backstop := time.NewTicker(cmp.Or(s.WaitBackstop, DefaultWaitBackstop))
	defer backstop.Stop()
	for {
		exec, img, err := read()
		switch {
		case err != nil && gongbu.ErrorCode(err) != gongbu.CodeNotFound:
			return exec, nil, err
		case err == nil && (seen == nil || exec.State != gongbu.State(*seen)):
			return exec, img, nil
		}
		select {
		case <-woken:
		case <-backstop.C:
		case <-deadline.C:
			return exec, img, err
		case <-stop:
			return exec, img, err
		case <-ctx.Done():
			return exec, img, err // the caller left; nobody reads the answer
		}
		afterWait = true
	}
}
