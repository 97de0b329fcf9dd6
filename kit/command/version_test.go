package command

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestVersionOnlyAsTheSoleArgument(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--version"}, {"-version"}, {"version"}} {
		var out bytes.Buffer
		if !Version("hubu", args, &out) {
			t.Errorf("%q: not taken as a request for the version", args)
		}
		if line := out.String(); !strings.HasPrefix(line, "hubu ") || strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, ")\n") {
			t.Errorf("%q printed %q, want one line: hubu VERSION (...)", args, line)
		}
	}
	for _, args := range [][]string{nil, {"serve"}, {"migrate", "version"}, {"version", "--json"}, {"--version", "serve"}, {"--versions"}} {
		var out bytes.Buffer
		if Version("hubu", args, &out) || out.Len() > 0 {
			t.Errorf("%q taken as a request for the version (printed %q)", args, out.String())
		}
	}
}

// goBuild builds testdata/versioned with the go command's extra flags and returns the binary.
func goBuild(t *testing.T, flags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "versioned")
	cmd := exec.Command("go", append(append([]string{"build", "-o", bin}, flags...), "./testdata/versioned")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// The flags here are the ones the release passes (.goreleaser.yaml, package buildinfo).
func TestMainAnswersVersionFromLinkedValues(t *testing.T) {
	t.Parallel()
	const pkg = "hubu.dev/hubu/kit/buildinfo"
	bin := goBuild(t, "-buildvcs=false", "-ldflags", "-X "+pkg+".version=1.2.3 -X "+pkg+".commit=0123456789abcdef0123456789abcdef01234567"+
		" -X "+pkg+".date=2026-11-30T08:00:00Z -X "+pkg+".modified=true")
	want := "versioned 1.2.3 (commit 0123456789ab, 2026-11-30T08:00:00Z, modified, " + runtime.Version() + ")\n"
	for _, arg := range []string{"--version", "-version", "version"} {
		out, err := exec.Command(bin, arg).Output()
		if err != nil || string(out) != want {
			t.Errorf("versioned %s: %v, printed %q, want %q", arg, err, out, want)
		}
	}
	// Anything else is the program's own.
	out, err := exec.Command(bin, "version", "extra").Output()
	if err != nil || string(out) != "run [\"version\" \"extra\"]\n" {
		t.Errorf("versioned version extra: %v, printed %q", err, out)
	}
}

// In a git checkout Go records the commit itself, workspace or not: a plain `go build` (no
// -ldflags) says which commit it is.
func TestMainAnswersVersionFromGo(t *testing.T) {
	t.Parallel()
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout, so Go has no commit to record: %v", err)
	}
	bin := goBuild(t, "-buildvcs=true")
	out, err := exec.Command(bin, "--version").Output()
	if want := "(commit " + string(head[:12]) + ", "; err != nil || !strings.Contains(string(out), want) {
		t.Fatalf("versioned --version: %v, printed %q, want it to hold %q", err, out, want)
	}
}
