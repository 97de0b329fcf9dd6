package httpserver_test

import (
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"

	"hubu.dev/hubu/kit/leaktest"
)

// TestMain fails the package when a test leaves a goroutine behind (a handler stuck in a slow
// fault, say). Idle keep-alive connections of the shared HTTP transport are not leaks.
func TestMain(m *testing.M) {
	// The spec's images are binary bodies; apitest then checks their status and content type.
	openapi3filter.RegisterBodyDecoder("image/png", openapi3filter.FileBodyDecoder)
	openapi3filter.RegisterBodyDecoder("image/jpeg", openapi3filter.FileBodyDecoder)
	leaktest.VerifyTestMain(m)
}
