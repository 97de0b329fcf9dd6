package registry

import (
	"container/list"
	"sync"
	"time"
)

// DefaultFinalsBytes is how many bytes of final results a Registry keeps in memory by
// default: some hundreds of answers with a small image or none, a few with a 64 KiB one.
const DefaultFinalsBytes = 512 << 10

// finals keeps the rows of recently finished calls in memory, so that a redelivery of a call
// whose final result is recorded is resolved without reading SQLite. A row cannot go stale
// once its result is recorded: its keys, request hash, tool and scope are written with the
// row and never change, and the result is written once (SetResult keeps the first). So a hit
// resolves exactly as a read of the row would, through the same resolveRow, conflicts
// included; a miss reads the row, which is how the answers other routers sharing the file
// recorded are found.
//
// It is bounded by the bytes of the results it holds, and forgets the least recently used
// first: a redelivery usually follows its first delivery within seconds (a client retrying
// a lost answer). It also forgets a row finalsMaxAge after caching it. Pruning deletes a row a
// day after its call at the soonest, so a row cached when it was recorded is forgotten long
// before: a call id that comes back after its row was pruned is a new call, and must not meet
// the old answer in a router that happened to keep it. A row cached later, when a redelivery
// read it again, may be pruned meanwhile and still be served for up to finalsMaxAge after it
// was read: that is the recorded answer to a call delivered again within that hour, harmless.
type finals struct {
	mu    sync.Mutex
	max   int // bytes of results; 0 keeps nothing
	size  int
	byKey map[callKey]*list.Element // of *finalRow
	lru   list.List                 // most recently used first
	now   func() time.Time
}

// finalsMaxAge is how long a row stays in finals: well below the one day after which a
// final call may be pruned (the router's prune command refuses less).
const finalsMaxAge = time.Hour

type finalRow struct {
	key    callKey
	row    seenRow
	size   int
	cached time.Time
}

func newFinals(maxBytes int) *finals {
	return &finals{max: maxBytes, byKey: map[callKey]*list.Element{}, now: time.Now}
}

// callKey is a call's row in a registry: the installation is the registry's own. The agent is
// part of it, so one agent's delivery never meets another's row, in memory or in the database.
type callKey struct{ agent, platform, callID string }

// key is the row c is a delivery of.
func (c Call) key() callKey { return callKey{agent: c.Agent, platform: c.Platform, callID: c.CallID} }

// get returns the cached row of a finished call.
func (f *finals) get(key callKey) (seenRow, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	el, ok := f.byKey[key]
	if !ok {
		return seenRow{}, false
	}
	if fr := el.Value.(*finalRow); f.now().Sub(fr.cached) >= finalsMaxAge {
		f.remove(el)
		return seenRow{}, false
	}
	f.lru.MoveToFront(el)
	return el.Value.(*finalRow).row, true
}

// remove forgets one cached row; f.mu is held.
func (f *finals) remove(el *list.Element) {
	old := f.lru.Remove(el).(*finalRow)
	delete(f.byKey, old.key)
	f.size -= old.size
}

// put caches the row of a finished call, unless its result would take more than a quarter
// of the budget, and returns the row as cached (with the memo of its decoded result). A
// result is counted twice: its bytes, and what Decoded makes of them.
func (f *finals) put(key callKey, row seenRow) seenRow {
	n := 2 * len(row.entry.Result)
	if row.entry.Result == nil || f.max == 0 || n > f.max/4 {
		return row
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if el, ok := f.byKey[key]; ok { // the result is the same: it is written once
		f.lru.MoveToFront(el)
		return el.Value.(*finalRow).row
	}
	row.entry.decoded = &decoded{}
	f.byKey[key] = f.lru.PushFront(&finalRow{key: key, row: row, size: n, cached: f.now()})
	f.size += n
	for f.size > f.max {
		f.remove(f.lru.Back())
	}
	return row
}
