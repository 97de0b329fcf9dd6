// Package waitfor is the tests' bounded wait for a condition that something else makes true:
// a goroutine, another process, a notification. It checks soon and then less often, and gives
// up after the time it is given, so a test waits no longer than it must and never forever.
// Production code never imports it.
package waitfor

import (
	"testing"
	"time"
)

// The pause between two checks starts at firstPause and doubles up to maxPause: a condition
// that holds at once costs a millisecond, one that takes seconds a check every 50 ms.
const (
	firstPause = time.Millisecond
	maxPause   = 50 * time.Millisecond
)

// Within checks cond until it holds or limit has passed, and reports whether it held. It calls
// no testing method, so any goroutine may use it.
func Within(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for pause := firstPause; !cond(); pause = min(2*pause, maxPause) {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(pause, left))
	}
	return true
}

// True waits like Within and fails the test when cond has not held within limit, saying what
// it waited for.
func True(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Within(limit, cond) {
		t.Fatalf("waited %v for %s", limit, what)
	}
}
