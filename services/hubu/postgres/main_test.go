package postgres

import (
	"testing"

	"hubu.dev/hubu/kit/leaktest"
)

// TestMain fails the package when a test leaves a goroutine behind: a listener not stopped,
// a pool not closed.
func TestMain(m *testing.M) {
	leaktest.VerifyTestMain(m)
}
