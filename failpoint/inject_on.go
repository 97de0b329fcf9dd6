//go:build failpoints

package failpoint

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// Enabled reports whether this binary was built with failpoints.
const Enabled = true

var armed = func() map[string]bool {
	m := map[string]bool{}
	for _, name := range strings.Split(os.Getenv("HUBU_FAILPOINTS"), ",") {
		if name = strings.TrimSpace(name); name != "" {
			m[name] = true
		}
	}
	return m
}()

// Inject kills the process with SIGKILL when the named failpoint is armed.
func Inject(name string) {
	if !armed[name] {
		return
	}
	fmt.Fprintf(os.Stderr, "{\"msg\":\"failpoint reached; crashing\",\"failpoint\":%q}\n", name)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL cannot be caught; wait for it
}
