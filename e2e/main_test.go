package e2e_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// bin holds the binaries built once for this run.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hubu-e2e-bin")
	if err != nil {
		panic(err)
	}
	bin = dir
	build := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "hubu.dev/hubu/services/gongbu/cmd/gongbu")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build the binaries: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
