package httpserver_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"hubu.dev/hubu/proto/hubuapi"
)

// flux-pro-1.1-ultra costs 60 000 micros, above the default auto-approve limit of 50 000.
func heldCall(t *testing.T, b *bundle, a agent) (call, hubuapi.Operation) {
	t.Helper()
	c := newCall("flux-pro-1.1-ultra")
	op := mustOperation(t, authorize(t, a, c))
	if op.State != hubuapi.OperationStatePendingApproval || op.DecisionId != nil || op.HeldMicros != 60_000 || op.ApprovalExpiresAt == nil {
		t.Fatalf("held: %+v", op)
	}
	if !op.ApprovalExpiresAt.Equal(b.Clock.Now().Add(24 * time.Hour)) {
		t.Fatalf("expires at %v, want 24h after %v", op.ApprovalExpiresAt, b.Clock.Now())
	}
	return c, op
}

func TestApprovalLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.NewAgent(t, "agent", nil)
	c, held := heldCall(t, b, a)

	// Replay-only: re-sending reports the state and never skips the approval.
	if r := authorize(t, a, c); r.StatusCode() != http.StatusOK || r.JSON200.State != hubuapi.OperationStatePendingApproval {
		t.Fatalf("replay while held: %d %s", r.StatusCode(), r.Body)
	}
	// Resume before approval does nothing.
	if r, _ := a.Client.ResumeOperationWithResponse(ctx, held.PublicHandle); r.JSON200 == nil || r.JSON200.State != hubuapi.OperationStatePendingApproval {
		t.Fatalf("resume while held: %d %s", r.StatusCode(), r.Body)
	}
	// The pending list shows it to operators only.
	list, _ := b.Operator.ListApprovalsWithResponse(ctx)
	if list.JSON200 == nil || len(list.JSON200.Operations) != 1 || list.JSON200.Operations[0].PublicHandle != held.PublicHandle {
		t.Fatalf("approvals: %s", list.Body)
	}
	// An agent credential can never approve, not even its own operation.
	wantStatus(t, "agent approving", replyOf(a.Client.ApproveOperationWithResponse(ctx, held.PublicHandle)), http.StatusForbidden)
	if len(b.Executor.Decisions()) != 0 {
		t.Fatal("the executor saw a held operation")
	}

	approved, _ := b.Operator.ApproveOperationWithResponse(ctx, held.PublicHandle)
	if approved.JSON200 == nil || approved.JSON200.State != hubuapi.OperationStateApproved || approved.JSON200.DecisionId == nil || *approved.JSON200.DecidedBy != "alice" {
		t.Fatalf("approve: %d %s", approved.StatusCode(), approved.Body)
	}
	decision := *approved.JSON200.DecisionId
	// Approving again answers the same decision.
	if again, _ := b.Operator.ApproveOperationWithResponse(ctx, held.PublicHandle); again.JSON200 == nil || *again.JSON200.DecisionId != decision {
		t.Fatalf("approve again: %s", again.Body)
	}
	// Approval alone does not run it, and neither does a re-delivery of the original call.
	if r := authorize(t, a, c); r.JSON200 == nil || r.JSON200.State != hubuapi.OperationStateApproved {
		t.Fatalf("replay after approval: %s", r.Body)
	}
	if len(b.Executor.Decisions()) != 0 {
		t.Fatal("approval ran the operation before the agent resumed it")
	}

	// Another agent cannot resume it.
	other := b.NewAgent(t, "other", nil)
	wantStatus(t, "other agent resuming", replyOf(other.Client.ResumeOperationWithResponse(ctx, held.PublicHandle)), http.StatusNotFound)

	resumed, _ := a.Client.ResumeOperationWithResponse(ctx, held.PublicHandle)
	if resumed.JSON200 == nil || resumed.JSON200.State != hubuapi.OperationStateExecuting {
		t.Fatalf("resume: %d %s", resumed.StatusCode(), resumed.Body)
	}
	for range 2 {
		if r, _ := a.Client.ResumeOperationWithResponse(ctx, held.PublicHandle); r.JSON200 == nil || r.JSON200.State != hubuapi.OperationStateExecuting {
			t.Fatalf("second resume: %s", r.Body)
		}
		if r := authorize(t, a, c); r.JSON200 == nil || r.JSON200.State != hubuapi.OperationStateExecuting {
			t.Fatalf("replay after resume: %s", r.Body)
		}
	}
	ds := b.Executor.Decisions()
	if len(ds) != 1 || ds[0].DecisionID != decision || ds[0].AmountMicros != 60_000 || ds[0].Scope.Model != "flux-pro-1.1-ultra" {
		t.Fatalf("executor decisions: %+v", ds)
	}

	// The executor settles for less than authorized: the rest is released.
	settled, _ := b.service.SettleDecisionWithResponse(ctx, decision, hubuapi.SettleRequest{AmountMicros: 55_000})
	if settled.JSON200 == nil || settled.JSON200.State != hubuapi.OperationStateSucceeded ||
		settled.JSON200.CapturedMicros != 55_000 || settled.JSON200.ReleasedMicros != 5_000 || settled.JSON200.HeldMicros != 0 {
		t.Fatalf("settle: %d %s", settled.StatusCode(), settled.Body)
	}
	ledger, _ := a.Client.GetOperationLedgerWithResponse(ctx, held.PublicHandle)
	if ledger.JSON200 == nil || len(ledger.JSON200.Entries) != 3 {
		t.Fatalf("ledger: %s", ledger.Body)
	}
	for i, kind := range []hubuapi.LedgerEntryKind{"hold", "capture", "release"} {
		if ledger.JSON200.Entries[i].Kind != kind {
			t.Fatalf("ledger entry %d is %s, want %s", i, ledger.JSON200.Entries[i].Kind, kind)
		}
	}
}

func TestDenyReleasesTheHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.NewAgent(t, "agent", nil)
	c, held := heldCall(t, b, a)
	reason := "not this one"
	wantStatus(t, "agent denying", replyOf(a.Client.DenyOperationWithResponse(ctx, held.PublicHandle, hubuapi.DenyRequest{})), http.StatusForbidden)
	denied, _ := b.Operator.DenyOperationWithResponse(ctx, held.PublicHandle, hubuapi.DenyRequest{Reason: &reason})
	if denied.JSON200 == nil || denied.JSON200.State != hubuapi.OperationStateDenied || denied.JSON200.HeldMicros != 0 ||
		denied.JSON200.ReleasedMicros != 60_000 || denied.JSON200.Denial.Message != reason {
		t.Fatalf("deny: %d %s", denied.StatusCode(), denied.Body)
	}
	if r, _ := a.Client.ResumeOperationWithResponse(ctx, held.PublicHandle); r.JSON200 == nil || r.JSON200.State != hubuapi.OperationStateDenied {
		t.Fatalf("resume after deny: %s", r.Body)
	}
	if r := authorize(t, a, c); r.JSON200 == nil || r.JSON200.State != hubuapi.OperationStateDenied {
		t.Fatalf("replay after deny: %s", r.Body)
	}
	wantStatus(t, "approve after deny", replyOf(b.Operator.ApproveOperationWithResponse(ctx, held.PublicHandle)), http.StatusConflict)
	if len(b.Executor.Decisions()) != 0 {
		t.Fatal("a denied operation reached the executor")
	}
	caps, _ := a.Client.GetCapabilitiesWithResponse(ctx)
	if caps.JSON200.Budget.UsedMicros != 0 {
		t.Fatalf("budget still used after deny: %+v", caps.JSON200.Budget)
	}
}

func TestApprovalExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("read after expiry", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.NewAgent(t, "agent", nil)
		c, held := heldCall(t, b, a)
		b.Clock.Advance(24*time.Hour - time.Second)
		if r, _ := a.Client.GetOperationWithResponse(ctx, held.PublicHandle); r.JSON200.State != hubuapi.OperationStatePendingApproval {
			t.Fatalf("a second before expiry: %s", r.Body)
		}
		b.Clock.Advance(time.Second)
		r, _ := a.Client.GetOperationWithResponse(ctx, held.PublicHandle)
		if r.JSON200 == nil || r.JSON200.State != hubuapi.OperationStateExpired || r.JSON200.HeldMicros != 0 || r.JSON200.ReleasedMicros != 60_000 {
			t.Fatalf("at expiry: %s", r.Body)
		}
		wantStatus(t, "approve after expiry", replyOf(b.Operator.ApproveOperationWithResponse(ctx, held.PublicHandle)), http.StatusConflict)
		if r := authorize(t, a, c); r.JSON200 == nil || r.JSON200.State != hubuapi.OperationStateExpired {
			t.Fatalf("replay after expiry: %s", r.Body)
		}
		if list, _ := b.Operator.ListApprovalsWithResponse(ctx); len(list.JSON200.Operations) != 0 {
			t.Fatalf("expired operation still pending: %s", list.Body)
		}
	})
	t.Run("approve after expiry without a read", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.NewAgent(t, "agent", nil)
		_, held := heldCall(t, b, a)
		b.Clock.Advance(25 * time.Hour)
		r, _ := b.Operator.ApproveOperationWithResponse(ctx, held.PublicHandle)
		if r.StatusCode() != http.StatusConflict || problemCode(t, r.Body) != "conflict" {
			t.Fatalf("approve after expiry: %d %s", r.StatusCode(), r.Body)
		}
		if n := b.Count(t, "SELECT count(*) FROM operations WHERE state = 'expired'"); n != 1 {
			t.Fatal("the refused approval did not close the expired operation")
		}
	})
	t.Run("sweeper", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.NewAgent(t, "agent", nil)
		heldCall(t, b, a)
		heldCall(t, b, a)
		b.Clock.Advance(24 * time.Hour)
		if _, err := b.Lifecycle.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		if n := b.Count(t, "SELECT count(*) FROM operations WHERE state = 'expired'"); n != 2 {
			t.Fatalf("%d expired by the sweeper, want 2", n)
		}
		caps, _ := a.Client.GetCapabilitiesWithResponse(ctx)
		if caps.JSON200.Budget.UsedMicros != 0 {
			t.Fatalf("expired holds still count: %+v", caps.JSON200.Budget)
		}
	})
	t.Run("configured window", func(t *testing.T) {
		t.Parallel()
		b := setupWithTTL(t, time.Hour)
		a := b.NewAgent(t, "agent", nil)
		op := mustOperation(t, authorize(t, a, newCall("flux-pro-1.1-ultra")))
		if !op.ApprovalExpiresAt.Equal(b.Clock.Now().Add(time.Hour)) {
			t.Fatalf("expires at %v, want an hour from now", op.ApprovalExpiresAt)
		}
	})
}

// An approved operation the agent never resumes does not hold budget forever: it expires
// at its resume deadline, and an operator may deny it before.
func TestApprovedButNotResumed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.NewAgent(t, "agent", nil)

	_, held := heldCall(t, b, a)
	b.Clock.Advance(23 * time.Hour) // approved late in its window
	approved, _ := b.Operator.ApproveOperationWithResponse(ctx, held.PublicHandle)
	if approved.JSON200 == nil || !approved.JSON200.ApprovalExpiresAt.Equal(b.Clock.Now().Add(24*time.Hour)) {
		t.Fatalf("approve: %s", approved.Body)
	}
	b.Clock.Advance(24 * time.Hour)
	if _, err := b.Lifecycle.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := a.Client.GetOperationWithResponse(ctx, held.PublicHandle)
	if got.JSON200.State != hubuapi.OperationStateExpired || got.JSON200.HeldMicros != 0 {
		t.Fatalf("after the resume deadline: %s", got.Body)
	}
	if r, _ := a.Client.ResumeOperationWithResponse(ctx, held.PublicHandle); r.JSON200.State != hubuapi.OperationStateExpired {
		t.Fatalf("resume after the deadline: %s", r.Body)
	}

	_, held2 := heldCall(t, b, a)
	b.Operator.ApproveOperationWithResponse(ctx, held2.PublicHandle)
	denied, _ := b.Operator.DenyOperationWithResponse(ctx, held2.PublicHandle, hubuapi.DenyRequest{})
	if denied.JSON200 == nil || denied.JSON200.State != hubuapi.OperationStateDenied || denied.JSON200.HeldMicros != 0 {
		t.Fatalf("deny an approved operation before its resume: %d %s", denied.StatusCode(), denied.Body)
	}
	if r, _ := a.Client.ResumeOperationWithResponse(ctx, held2.PublicHandle); r.JSON200.State != hubuapi.OperationStateDenied {
		t.Fatalf("resume after deny: %s", r.Body)
	}
	if len(b.Executor.Decisions()) != 0 {
		t.Fatal("an expired or denied approval reached the executor")
	}
}
