// Package testclock is a controllable clock for tests, safe for concurrent use: services take
// its Now as their time source and a test moves it on. Production code never imports it.
package testclock

import (
	"sync"
	"time"
)

// Clock is a time source that moves only when told to.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock at 2026-11-30T10:00:00Z.
func New() *Clock { return At(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)) }

// At returns a clock at t.
func At(t time.Time) *Clock { return &Clock{now: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
