package main

import (
	"testing"

	"hubu.dev/hubu/kit/command/commandtest"
)

// `hubuctl --version` (and `hubuctl version`) needs no settings and prints one line with the
// version and commit.
func TestVersion(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"--version", "version"} {
		r := runCLI(t, nil, arg)
		if r.code != 0 || r.stderr != "" {
			t.Errorf("hubuctl %s: exit %d, stderr %q; want 0 and nothing", arg, r.code, r.stderr)
		}
		commandtest.RequireVersionLine(t, "hubuctl", r.stdout)
	}
}
