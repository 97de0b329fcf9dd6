package stack

import (
	"context"
	"fmt"
	"os"
	"testing"
)

// TestMain is the TestMain of a test package that starts real stacks: it builds every binary
// once into a temporary directory (with the failpoints compiled in, when asked), sets *bin,
// runs the tests, removes the directory and exits with the tests' code.
func TestMain(m *testing.M, repoRoot string, failpoints bool, bin *Binaries) {
	dir, err := os.MkdirTemp("", "hubu-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*bin, err = Build(context.Background(), repoRoot, dir, failpoints)
	if err != nil {
		os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
