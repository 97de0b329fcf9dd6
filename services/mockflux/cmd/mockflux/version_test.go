package main

import (
	"testing"

	"hubu.dev/hubu/kit/command/commandtest"
)

// `mockflux --version` (and `mockflux version`) prints one line with the version and commit.
func TestVersion(t *testing.T) {
	t.Parallel()
	commandtest.RequireBinaryVersion(t, binary, "mockflux")
}
