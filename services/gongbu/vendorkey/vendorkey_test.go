package vendorkey

import (
	"strings"
	"testing"

	"github.com/google/uuid"
)

func TestFor(t *testing.T) {
	t.Parallel()
	d := uuid.MustParse("6f1c2a4e-9b7d-4c3e-8a21-0d5f6e7a8b9c")
	k := For("bfl", d)
	if k != For("bfl", d) {
		t.Fatal("not deterministic")
	}
	if len(k) != 64 || strings.Contains(k, d.String()) || strings.Contains(k, strings.ReplaceAll(d.String(), "-", "")) {
		t.Fatalf("key %q", k)
	}
	if k == For("other", d) || k == For("bfl", uuid.New()) {
		t.Fatal("key does not depend on provider and decision")
	}
	// Pinned: changing the derivation would make every decision in flight look new to the
	// provider, and a resubmission would be charged again.
	if want := "a9e072c1a877ab8310d9b4c085efd7a0008972a0adb3fd5507b65df8bc64bbee"; k != want {
		t.Fatalf("key %s, want %s", k, want)
	}
}
