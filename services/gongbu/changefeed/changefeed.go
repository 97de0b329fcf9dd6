// Package changefeed wakes requests that wait for an execution to change.
//
// The process's Postgres listener (kit/pglisten) feeds it: the database notifies the public
// handle of every execution that was inserted or changed state, in whichever replica made the
// change. A wake-up is only a hint to read again; a waiter also reads again on a backstop
// interval, and a gap in the listener (a lost connection) wakes every waiter.
package changefeed

import "sync"

// Channel is the Postgres notification channel the executions table notifies (see
// sql/gongbu/migrations/000004_change_notifications.up.sql).
const Channel = "gongbu_execution"

// Feed fans notifications out to the waiters of each public handle. The zero value is ready.
type Feed struct {
	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
}

// Subscribe returns a channel that receives a value whenever the execution with this handle
// may have changed, and the function that ends the subscription. Subscribe before reading
// the execution, so that no change between the read and the wait goes unseen.
func (f *Feed) Subscribe(handle string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	if f.waiters == nil {
		f.waiters = map[string]map[chan struct{}]struct{}{}
	}
	if f.waiters[handle] == nil {
		f.waiters[handle] = map[chan struct{}]struct{}{}
	}
	f.waiters[handle][ch] = struct{}{}
	f.mu.Unlock()
	return ch, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.waiters[handle], ch)
		if len(f.waiters[handle]) == 0 {
			delete(f.waiters, handle)
		}
	}
}

// Notify wakes the waiters of handle. It never blocks: a waiter already woken stays woken once.
func (f *Feed) Notify(handle string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.waiters[handle] {
		wake(ch)
	}
}

// Waiters is how many subscriptions are open.
func (f *Feed) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, set := range f.waiters {
		n += len(set)
	}
	return n
}

// NotifyAll wakes every waiter: notifications may have been missed.
func (f *Feed) NotifyAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, set := range f.waiters {
		for ch := range set {
			wake(ch)
		}
	}
}

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
