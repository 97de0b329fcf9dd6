//go:build !failpoints

package failpoint

// Inject does nothing outside the failpoints build.
func Inject(string) {}

// Enabled reports whether this binary was built with failpoints.
const Enabled = false
