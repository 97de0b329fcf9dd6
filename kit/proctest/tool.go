package proctest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Tool returns the path of an outside program a test drives (Chromium, Prometheus): the
// setting's value when the environment sets it, else the first of names found on PATH. A test
// that needs the tool fails when neither finds it, naming both: make test checks for its tools
// (scripts/ensure-test-tools.sh) before it runs anything, so a missing one is a broken machine,
// not a reason to skip.
func Tool(t testing.TB, setting string, names ...string) string {
	t.Helper()
	if p := os.Getenv(setting); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%s=%s: %v", setting, p, err)
		}
		return p
	}
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	t.Fatalf("none of %s is on PATH, and %s is not set: scripts/ensure-test-tools.sh installs it or says what is missing",
		strings.Join(names, ", "), setting)
	return ""
}

// Chromium returns the headless browser the console's tests drive: $HUBU_CHROMIUM, or
// Chromium or Chrome on PATH under any of the names distributions give it.
func Chromium(t testing.TB) string {
	t.Helper()
	return Tool(t, "HUBU_CHROMIUM", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
}
