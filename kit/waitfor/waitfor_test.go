package waitfor_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"hubu.dev/hubu/kit/waitfor"
)

func TestWithin(t *testing.T) {
	t.Parallel()
	if !waitfor.Within(time.Second, func() bool { return true }) {
		t.Fatal("a condition that holds at once did not")
	}
	var checks atomic.Int32
	if !waitfor.Within(10*time.Second, func() bool { return checks.Add(1) == 5 }) {
		t.Fatal("a condition that holds on its fifth check did not")
	}
	// One that never holds is given up on, after the limit and not long after.
	began := time.Now()
	if waitfor.Within(100*time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition that never holds did")
	}
	if took := time.Since(began); took < 100*time.Millisecond || took > 5*time.Second {
		t.Fatalf("gave up after %v, want the 100ms limit", took)
	}
}

// A condition made true by another goroutine is seen.
func TestWithinSeesAnotherGoroutine(t *testing.T) {
	t.Parallel()
	var done atomic.Bool
	go func() {
		time.Sleep(20 * time.Millisecond)
		done.Store(true)
	}()
	waitfor.True(t, 10*time.Second, "the other goroutine", done.Load)
}

// recorder is a testing.TB that keeps what Fatalf was told.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestTrueFailsTheTest(t *testing.T) {
	t.Parallel()
	r := &recorder{TB: t}
	waitfor.True(r, 10*time.Millisecond, "nothing", func() bool { return false })
	if r.failed != "waited 10ms for nothing" {
		t.Fatalf("a condition that never held failed the test with %q", r.failed)
	}
}
