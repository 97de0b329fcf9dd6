// Package timertest gives a test's controlled clock (kit/testclock) the timers that code
// waiting on it needs: After returns a channel that receives once the test has moved the
// clock far enough with Advance. Production code never imports it.
package timertest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"hubu.dev/hubu/kit/testclock"
)

// Timers are timers on one testclock.Clock. Move the clock only through Advance, or the
// timers do not notice.
type Timers struct {
	Clock *testclock.Clock

	mu      sync.Mutex
	waiting []timer
	asked   []time.Duration
}

type timer struct {
	at time.Time
	c  chan time.Time
}

// New returns timers on clk.
func New(clk *testclock.Clock) *Timers { return &Timers{Clock: clk} }

// After is time.After on the clock: the channel receives the clock's time once Advance has
// moved it d on (at once when d is not positive).
func (f *Timers) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, d)
	c := make(chan time.Time, 1)
	now := f.Clock.Now()
	if d <= 0 {
		c <- now
		return c
	}
	f.waiting = append(f.waiting, timer{at: now.Add(d), c: c})
	return c
}

// Advance moves the clock on by d and fires the timers that are then due.
func (f *Timers) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Clock.Advance(d)
	now := f.Clock.Now()
	f.waiting = slices.DeleteFunc(f.waiting, func(t timer) bool {
		if t.at.After(now) {
			return false
		}
		t.c <- now
		return true
	})
}

// Waiting is how many timers have not fired yet.
func (f *Timers) Waiting() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiting)
}

// Asked lists the durations After was called with, in order.
func (f *Timers) Asked() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.asked)
}

// AwaitWaiting waits (at most 10 s of real time) until n timers are waiting: for code that
// makes its timers in a goroutine of its own, such as a retry's.
func (f *Timers) AwaitWaiting(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for f.Waiting() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d timers waiting after 10s, want %d", f.Waiting(), n)
		}
		time.Sleep(time.Millisecond)
	}
}
