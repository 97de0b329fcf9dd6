package main

import (
	"testing"

	"hubu.dev/hubu/kit/command/commandtest"
)

// `hubu-unified-mcp --version` (and `hubu-unified-mcp version`) prints one line with the version and commit.
func TestVersion(t *testing.T) {
	t.Parallel()
	commandtest.RequireBinaryVersion(t, binary, "hubu-unified-mcp")
}
