package e2e_test

import (
	"testing"

	harness "hubu.dev/hubu/e2e/stack"
)

// bin holds every binary, built once for this run with the failpoints compiled in.
var bin harness.Binaries

func TestMain(m *testing.M) { harness.TestMain(m, "..", true, &bin) }
