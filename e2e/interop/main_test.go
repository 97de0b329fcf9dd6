// Package interop_test runs the real agent harnesses, Codex (`codex exec`) and Claude Code
// (`claude -p`), installed from npm at the versions pinned in harnesses/package.json, against
// the real router over stdio and the real stack behind it. The model is a fake of our own on
// loopback (the OpenAI Responses API for Codex, the Anthropic Messages API for Claude Code), so
// nothing leaves the machine and the fake decides every tool-call id.
//
// `make interop` runs them (npm ci, then HUBU_INTEROP=1 go test). Without HUBU_INTEROP=1 the
// package does nothing: `make test` covers hubu.dev/hubu/e2e/..., which includes this
// directory, and these tests need 800 MB of harnesses that only `make interop` installs.
// With HUBU_INTEROP=1 a missing harness fails the run; it is never skipped.
package interop_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	harness "hubu.dev/hubu/e2e/stack"
)

// bin holds every binary of the stack, built once for this run.
var bin harness.Binaries

// harnessBin is where `npm ci` in harnesses/ puts the harnesses' commands.
var harnessBin string

func TestMain(m *testing.M) {
	if os.Getenv("HUBU_INTEROP") != "1" {
		fmt.Println("interop: not run; `make interop` runs the real-harness tests (HUBU_INTEROP=1)")
		os.Exit(0)
	}
	var err error
	if harnessBin, err = filepath.Abs(filepath.Join("harnesses", "node_modules", ".bin")); err != nil {
		panic(err)
	}
	for _, h := range []struct{ command, pkg string }{{"codex", "@openai/codex"}, {"claude", "@anthropic-ai/claude-code"}} {
		version, err := installedVersion(h.pkg)
		if err == nil {
			_, err = os.Stat(filepath.Join(harnessBin, h.command))
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "interop: %s is not installed in e2e/interop/harnesses (`make interop` runs npm ci there): %v\n", h.pkg, err)
			os.Exit(1)
		}
		fmt.Printf("interop: %s@%s\n", h.pkg, version)
	}
	harness.TestMain(m, filepath.Join("..", ".."), false, &bin)
}
