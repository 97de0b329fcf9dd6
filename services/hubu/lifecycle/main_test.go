package lifecycle_test

import (
	"testing"

	"hubu.dev/hubu/kit/leaktest"
)

func TestMain(m *testing.M) {
	leaktest.VerifyTestMain(m)
}
