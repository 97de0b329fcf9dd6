package changefeed

import "testing"

func woken(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestFeedWakesOnlyTheHandlesWaiters(t *testing.T) {
	var f Feed
	a1, endA1 := f.Subscribe("a")
	a2, endA2 := f.Subscribe("a")
	b, endB := f.Subscribe("b")
	defer endB()

	f.Notify("a")
	f.Notify("a") // a second wake-up before the first is taken is the same wake-up
	if !woken(a1) || !woken(a2) || woken(b) {
		t.Fatal("Notify(a) must wake a's waiters and no one else")
	}
	if woken(a1) {
		t.Fatal("two notifications before a read must leave one wake-up, not two")
	}
	endA1()
	f.Notify("a")
	if woken(a1) || !woken(a2) {
		t.Fatal("an ended subscription must not be woken")
	}
	endA2()
	if _, ok := f.waiters["a"]; ok {
		t.Fatal("a handle without waiters must be forgotten")
	}
	f.NotifyAll()
	if !woken(b) {
		t.Fatal("NotifyAll must wake every waiter")
	}
}
