package commandtest

import (
	"bytes"
	"os/exec"
	"regexp"
	"testing"
)

// versionLine is buildinfo.Info.Line's shape: name, version, and in parentheses at least the commit.
var versionLine = regexp.MustCompile(`^(\S+) \S+ \(commit [^()]+\)\n$`)

// RequireVersionLine checks that out is the one line a binary called name prints for --version.
func RequireVersionLine(t testing.TB, name, out string) {
	t.Helper()
	if m := versionLine.FindStringSubmatch(out); m == nil || m[1] != name {
		t.Errorf("printed %q, want one line: %s VERSION (commit ...)", out, name)
	}
}

// RequireBinaryVersion runs binary, which calls itself name, with --version and with version,
// and checks that each prints its version line to stdout, nothing to stderr, and exits 0.
func RequireBinaryVersion(t testing.TB, binary, name string) {
	t.Helper()
	for _, arg := range []string{"--version", "version"} {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(binary, arg)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil || stderr.Len() > 0 {
			t.Errorf("%s %s: %v, stderr %q", name, arg, err, stderr.String())
		}
		RequireVersionLine(t, name, stdout.String())
	}
}
