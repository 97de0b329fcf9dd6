//go:build failpoints

package failpoint

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
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

// Clock is time.Now shifted by HUBU_CLOCK_OFFSET (a Go duration such as 25h or -3s), so the
// fault explorer can start a process whose clock has jumped. It panics on a malformed value:
// a test that asked for a jump must not silently run without one.
func Clock() func() time.Time {
	v := os.Getenv("HUBU_CLOCK_OFFSET")
	if v == "" {
		return time.Now
	}
	offset, err := time.ParseDuration(v)
	if err != nil {
		panic(fmt.Sprintf("HUBU_CLOCK_OFFSET=%q: %v", v, err))
	}
	return func() time.Time { return time.Now().Add(offset) }
}
