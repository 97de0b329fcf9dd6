package e2e_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	harness "hubu.dev/hubu/e2e/stack"
)

// bin holds every binary, built once for this run with the failpoints compiled in.
var bin harness.Binaries

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hubu-e2e-bin")
	if err != nil {
		panic(err)
	}
	bin, err = harness.Build(context.Background(), "..", dir, true)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
