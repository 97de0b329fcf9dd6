package httpserver_test

import (
	"testing"

	"hubu.dev/hubu/kit/leaktest"
)

// TestMain fails the package when a test leaves a goroutine behind (a stuck hand-off, an
// unclosed pool). Idle keep-alive connections of the shared HTTP transport are not leaks.
func TestMain(m *testing.M) {
	leaktest.VerifyTestMain(m)
}
