package main

import (
	"testing"

	"hubu.dev/hubu/kit/command/commandtest"
)

// `hubu --version` (and `hubu version`) prints one line with the version and commit.
func TestVersion(t *testing.T) {
	t.Parallel()
	commandtest.RequireBinaryVersion(t, binary, "hubu")
}
