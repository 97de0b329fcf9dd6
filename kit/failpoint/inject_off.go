//go:build !failpoints

package failpoint

import "time"

// Inject does nothing outside the failpoints build.
func Inject(string) {}

// Enabled reports whether this binary was built with failpoints.
const Enabled = false

// Clock is time.Now outside the failpoints build.
func Clock() func() time.Time { return time.Now }
