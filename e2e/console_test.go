package e2e_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"hubu.dev/hubu/kit/proctest"
)

// The approval console in a real headless Chromium, with spends made through the router as
// an agent's harness makes them: one approved in the console then resumed through the router
// (charged once), one denied (never executed).
func TestSuiteConsoleApproval(t *testing.T) {
	t.Parallel()
	chromium := proctest.Chromium(t)
	su := newSuite(t)
	cs := su.router()
	ultra := func(p string) string {
		return fmt.Sprintf(`{"prompt":%q,"model":"flux-pro-1.1-ultra","aspect_ratio":"16:9"}`, p)
	}
	approveMe := su.mustCall(cs, "generate_image", ultra("a cathedral of paper"), codexMeta("call_console1WKmiI5gRXneR0Y4d"))
	denyMe := su.mustCall(cs, "generate_image", ultra("a bridge of paper"), codexMeta("call_console2XRWMKxcVjBLPyFYP"))
	if approveMe.code() != "approval_required" || denyMe.code() != "approval_required" {
		t.Fatalf("held: %v %v", approveMe, denyMe)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 900))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		_ = chromedp.Cancel(cctx)
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	step := func(name string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		tctx, tcancel := context.WithTimeout(ctx, 30*time.Second)
		defer tcancel()
		if err := chromedp.Do(tctx, steps...); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	row := func(handle string) string { return `#approvals tr[data-handle="` + handle + `"]` }

	step("sign in",
		chromedp.Navigate(su.s.Hubu.URL()+"/console/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), su.s.Credentials.OperatorToken),
		chromedp.Click(chromedp.CSS("#sign-in")),
		chromedp.WaitVisible(chromedp.CSS(row(approveMe.handle()))),
		chromedp.WaitVisible(chromedp.CSS(row(denyMe.handle()))),
	)
	tctx, tcancel := context.WithTimeout(ctx, 30*time.Second)
	png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
	tcancel()
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dir := cmp.Or(os.Getenv("HUBU_TEST_ARTIFACTS"), t.TempDir())
	if err := os.MkdirAll(dir, 0o755); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "console-pending-e2e.png"), png, 0o644)
	}
	step("approve",
		chromedp.Click(chromedp.CSS(row(approveMe.handle())+" button.approve")),
		chromedp.WaitVisible(chromedp.CSS("#confirm")),
		chromedp.Click(chromedp.CSS("#confirm")),
		chromedp.WaitVisible(chromedp.CSS(".flash")),
	)
	step("deny",
		chromedp.Click(chromedp.CSS(row(denyMe.handle())+" button.deny")),
		chromedp.WaitVisible(chromedp.CSS("#reason")),
		chromedp.SendKeys(chromedp.CSS("#reason"), "not today"),
		chromedp.Click(chromedp.CSS("#confirm")),
		chromedp.WaitVisible(chromedp.CSS(".flash")),
	)

	if r := su.mustCall(cs, "resume_operation", fmt.Sprintf(`{"public_handle":%q}`, approveMe.handle()), nil); r["status"] != "succeeded" {
		t.Fatalf("resume of the approved spend: %v", r)
	}
	if r := su.mustCall(cs, "resume_operation", fmt.Sprintf(`{"public_handle":%q}`, denyMe.handle()), nil); r.code() != "denied" {
		t.Fatalf("resume of the denied spend: %v", r)
	}
	su.settleAndReconcile(1)
	if total := su.charges().TotalMicros; total != 60_000 {
		t.Fatalf("charged %d micros, want the approved 60000 only", total)
	}
}
