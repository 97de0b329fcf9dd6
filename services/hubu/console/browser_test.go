package console_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"hubu.dev/hubu/kit/proctest"
	"hubu.dev/hubu/services/hubu"
)

// TestConsoleInBrowser drives the console in a real headless Chromium: sign in, see held
// spends (made through the API as an agent), watch a new one appear without a reload,
// approve one and deny another through their confirmation pages; then the agent's resume
// runs the approved one, and the denied one is never executed. A screenshot of the
// pending list is saved to $HUBU_TEST_ARTIFACTS (or the test's temporary directory).
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.newAgent(t, "painter")
	approveMe := a.hold(t, "a red fox in the snow, woodcut")
	denyMe := a.hold(t, `<script>alert("x")</script> deny me`)

	ctx := newBrowser(t)
	do(t, ctx, "sign in",
		chromedp.Navigate(b.URL+"/console/"), // signed out: sent to the sign-in page
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), b.OperatorToken),
		chromedp.Click(chromedp.CSS("#sign-in")),
		chromedp.WaitVisible(row(approveMe)),
		chromedp.WaitVisible(row(denyMe)),
	)
	// A marker that a full reload would lose.
	if m := value(t, ctx, "set a marker", chromedp.Evaluate[string](`window.hubuMarker = "same page"`)); m != "same page" {
		t.Fatalf("marker: %q", m)
	}

	// A spend held after the page loaded shows up in place.
	later := a.hold(t, "a lighthouse at dusk")
	do(t, ctx, "live refresh", chromedp.WaitVisible(row(later)))
	marker := value(t, ctx, "read the marker", chromedp.Evaluate[string](`window.hubuMarker || "reloaded"`))
	if marker != "same page" {
		t.Fatalf("the pending list was refreshed by a full reload (%q)", marker)
	}
	list := value(t, ctx, "read the list", chromedp.Text(chromedp.CSS("#approvals")))
	for _, want := range []string{"painter", "flux-pro-1.1-ultra", "16:9", "USD 0.06", `<script>alert("x")</script> deny me`} {
		if !strings.Contains(list, want) {
			t.Fatalf("the pending list does not show %q:\n%s", want, list)
		}
	}
	screenshot(t, ctx, "console-pending.png")

	do(t, ctx, "approve",
		chromedp.Click(chromedp.CSS(string(row(approveMe))+" button.approve")),
		chromedp.WaitVisible(chromedp.CSS("#confirm")),
		chromedp.Click(chromedp.CSS("#confirm")),
		chromedp.WaitVisible(chromedp.CSS(".flash")),
	)
	if flash := value(t, ctx, "read the message", chromedp.Text(chromedp.CSS(".flash"))); flash != "Operation "+approveMe+" approved." {
		t.Fatalf("after approving: %q", flash)
	}
	do(t, ctx, "deny",
		chromedp.Click(chromedp.CSS(string(row(denyMe))+" button.deny")),
		chromedp.WaitVisible(chromedp.CSS("#reason")),
		chromedp.SendKeys(chromedp.CSS("#reason"), "not today"),
		chromedp.Click(chromedp.CSS("#confirm")),
		chromedp.WaitVisible(chromedp.CSS(".flash")),
	)
	if flash := value(t, ctx, "read the message", chromedp.Text(chromedp.CSS(".flash"))); flash != "Operation "+denyMe+" denied." {
		t.Fatalf("after denying: %q", flash)
	}

	// The agent resumes both: the approved one runs, once; the denied one stays unexecuted.
	if op := a.resume(t, approveMe); op.State != "executing" {
		t.Fatalf("resume of the approved spend: %s", op.State)
	}
	if op := a.resume(t, denyMe); op.State != "denied" || op.Denial == nil || op.Denial.Message != "not today" {
		t.Fatalf("resume of the denied spend: %+v", op)
	}
	ds := b.Executor.Decisions()
	if len(ds) != 1 || ds[0].PublicHandle != approveMe || ds[0].AmountMicros != 60_000 {
		t.Fatalf("the executor got %+v, want only %s", ds, approveMe)
	}
	if s := b.state(t, later); s != hubu.StatePendingApproval {
		t.Fatalf("the untouched spend is %s", s)
	}
	do(t, ctx, "operations page",
		chromedp.Click(chromedp.CSS(`a[href="/console/operations"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-handle="`+approveMe+`"]`)),
	)
	ops := value(t, ctx, "read the operations", chromedp.Text(chromedp.CSS("main")))
	// Budget: 3 × USD 0.06 held or used, the denied one released: USD 0.12 of USD 5.00.
	for _, want := range []string{"executing", "denied", "not today", "USD 4.88"} {
		if !strings.Contains(ops, want) {
			t.Fatalf("the operations page does not show %q:\n%s", want, ops)
		}
	}
}

// newBrowser starts a headless Chromium with its own profile; it is closed when the test ends.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(proctest.Chromium(t)),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		_ = chromedp.Cancel(cctx) // closes the browser and waits for it
		cancel()
		cancelAlloc()
	})
	// The first run starts the browser and binds it to ctx: it must have no timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

// do runs steps, each batch bounded in time.
func do(t *testing.T, ctx context.Context, step string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	value(t, ctx, step, chromedp.Steps(steps...))
}

// value runs an action that returns a value, bounded in time.
func value[T any](t *testing.T, ctx context.Context, step string, a chromedp.Action[T]) T {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(tctx, a)
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	return v
}

// row selects the pending list's row of an operation.
func row(handle string) chromedp.CSS {
	return chromedp.CSS(`#approvals tr[data-handle="` + handle + `"]`)
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("HUBU_TEST_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	png := value(t, ctx, "screenshot", chromedp.FullScreenshot(100))
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the pending list: %s", path)
}

// TestAgentPageInBrowser: from the header to an agent's page, a sign-in code is issued and
// shown, and a connected client is revoked through its confirmation page, in a real Chromium.
func TestAgentPageInBrowser(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.newAgent(t, "painter")
	grant := b.allowClient(t, a.ID, "Claude")

	ctx := newBrowser(t)
	do(t, ctx, "sign in and open the agent",
		chromedp.Navigate(b.URL+"/console/sign-in"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), b.OperatorToken),
		chromedp.Click(chromedp.CSS("#sign-in")),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/console/agents"]`)),
		chromedp.Click(chromedp.CSS(`a[href="/console/agents"]`)),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/console/agents/`+a.ID.String()+`"]`)),
		chromedp.Click(chromedp.CSS(`a[href="/console/agents/`+a.ID.String()+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#grants tr[data-grant="`+grant.String()+`"]`)),
		chromedp.Click(chromedp.CSS("#invite")),
		chromedp.WaitVisible(chromedp.CSS("#invite-code")),
	)
	code := value(t, ctx, "read the code", chromedp.Text(chromedp.CSS("#invite-code")))
	if id, err := b.Store.UseInvite(t.Context(), code, b.Clock.Now()); err != nil || id != a.ID {
		t.Fatalf("the code %q: %v %v", code, id, err)
	}
	do(t, ctx, "revoke the client",
		chromedp.Click(chromedp.CSS(`a[href="/console/agents/`+a.ID.String()+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#grants tr[data-grant="`+grant.String()+`"] button.deny`)),
		chromedp.Click(chromedp.CSS(`#grants tr[data-grant="`+grant.String()+`"] button.deny`)),
		chromedp.WaitVisible(chromedp.CSS("#confirm")),
		chromedp.Click(chromedp.CSS("#confirm")),
		chromedp.WaitVisible(chromedp.CSS(".flash")),
	)
	if flash := value(t, ctx, "read the message", chromedp.Text(chromedp.CSS(".flash"))); flash != "Revoked Claude's access as painter: its tokens are refused within seconds." {
		t.Fatalf("after revoking: %q", flash)
	}
	if _, err := b.Store.AuthenticateGrant(t.Context(), grant, b.Clock.Now()); hubu.ErrorCode(err) != hubu.CodeCredentialRevoked {
		t.Fatalf("the revoked grant: %v", err)
	}
}
