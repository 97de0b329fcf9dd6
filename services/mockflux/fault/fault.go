// Package fault holds the faults a test arms in mockflux through POST /_mock/faults, and
// hands each submit request the effects it must suffer, and each webhook whether it is dropped.
package fault

import (
	"fmt"
	"sync"
	"time"

	"hubu.dev/hubu/proto/bflapi"
)

// Kinds in the order they are listed and applied.
var Kinds = []bflapi.FaultKind{
	bflapi.FaultKindSlow,
	bflapi.FaultKindFailBeforeCharge,
	bflapi.FaultKindIdempotencyOff,
	bflapi.FaultKindChargeThenDrop,
	bflapi.FaultKindChargeThen500,
	bflapi.FaultKindRequestModerated,
	bflapi.FaultKindContentModerated,
	bflapi.FaultKindTaskError,
	bflapi.FaultKindWebhookDrop,
}

// MaxDelay bounds a slow fault, so a mistaken delay cannot hang a test run.
const MaxDelay = 10 * time.Minute

// Armed is one armed fault. Remaining 0 means until cleared.
type Armed struct {
	Kind      bflapi.FaultKind
	Remaining int
	Delay     time.Duration
}

// Effects is what one submit request must suffer.
type Effects struct {
	Slow             time.Duration
	FailBeforeCharge bool
	IdempotencyOff   bool
	ChargeThenDrop   bool
	ChargeThen500    bool
	// Outcome is how the task is to end when a moderation or error fault is armed (the
	// first of them in Kinds' order): a mockflux.Outcome* status; "" is Ready.
	Outcome string
}

// Set is the armed faults; the zero value has none. It is safe for concurrent use.
type Set struct {
	mu    sync.Mutex
	armed map[bflapi.FaultKind]Armed
}

// Arm arms kind for the next count submit requests (0: until cleared), replacing an armed
// fault of the same kind.
func (s *Set) Arm(kind bflapi.FaultKind, count int, delay time.Duration) error {
	switch {
	case !kind.Valid():
		return fmt.Errorf("unknown fault kind %q", kind)
	case count < 0:
		return fmt.Errorf("count must not be negative")
	case kind == bflapi.FaultKindSlow && (delay <= 0 || delay > MaxDelay):
		return fmt.Errorf("slow needs delay_ms between 1 and %d", MaxDelay.Milliseconds())
	case kind != bflapi.FaultKindSlow && delay != 0:
		return fmt.Errorf("delay_ms applies only to slow")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.armed == nil {
		s.armed = make(map[bflapi.FaultKind]Armed)
	}
	s.armed[kind] = Armed{Kind: kind, Remaining: count, Delay: delay}
	return nil
}

// Clear disarms every fault.
func (s *Set) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = nil
}

// Active lists the armed faults in the order of Kinds.
func (s *Set) Active() []Armed {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Armed{}
	for _, k := range Kinds {
		if a, ok := s.armed[k]; ok {
			out = append(out, a)
		}
	}
	return out
}

// Take returns the effects for one submit request and uses up one unit of every armed
// submit fault with a count, disarming those that reach zero. webhook_drop is not a submit
// fault: webhooks use it up (TakeWebhookDrop), so that a test can arm it for exactly the next
// N notices however many submits come first.
func (s *Set) Take() Effects {
	s.mu.Lock()
	defer s.mu.Unlock()
	var e Effects
	for _, k := range Kinds {
		a, ok := s.armed[k]
		if !ok {
			continue
		}
		switch k {
		case bflapi.FaultKindSlow:
			e.Slow = a.Delay
		case bflapi.FaultKindFailBeforeCharge:
			e.FailBeforeCharge = true
		case bflapi.FaultKindIdempotencyOff:
			e.IdempotencyOff = true
		case bflapi.FaultKindChargeThenDrop:
			e.ChargeThenDrop = true
		case bflapi.FaultKindChargeThen500:
			e.ChargeThen500 = true
		case bflapi.FaultKindRequestModerated, bflapi.FaultKindContentModerated, bflapi.FaultKindTaskError:
			if e.Outcome == "" {
				e.Outcome = outcomes[k]
			}
		case bflapi.FaultKindWebhookDrop:
			continue
		}
		s.useUp(k)
	}
	return e
}

// outcomes are the statuses the end faults give a task (mockflux.Outcome*).
var outcomes = map[bflapi.FaultKind]string{
	bflapi.FaultKindRequestModerated: "Request Moderated", bflapi.FaultKindContentModerated: "Content Moderated", bflapi.FaultKindTaskError: "Error",
}

// TakeWebhookDrop reports whether the webhook about to be sent must be dropped, using up one
// unit of an armed webhook_drop.
func (s *Set) TakeWebhookDrop() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.armed[bflapi.FaultKindWebhookDrop]; !ok {
		return false
	}
	s.useUp(bflapi.FaultKindWebhookDrop)
	return true
}

// useUp counts one use of the armed fault kind; s.mu is held.
func (s *Set) useUp(kind bflapi.FaultKind) {
	a := s.armed[kind]
	if a.Remaining == 0 {
		return // until cleared
	}
	a.Remaining--
	if a.Remaining == 0 {
		delete(s.armed, kind)
	} else {
		s.armed[kind] = a
	}
}
