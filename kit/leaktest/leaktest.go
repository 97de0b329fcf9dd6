// Package leaktest is the goroutine leak check of the tests' TestMain functions; production
// code never imports it.
package leaktest

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// ignored are goroutines of idle keep-alive connections (an HTTP client's, reading, writing or
// waiting in the poller), which the transport closes in its own time.
var ignored = []goleak.Option{
	goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
	goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
}

// VerifyTestMain runs the tests and fails them if goroutines outlive them.
func VerifyTestMain(m *testing.M) { os.Exit(Check(m.Run())) }

// Check is the check for a TestMain that runs the tests itself: given their exit code, it
// returns 1 when they passed but left goroutines running, else the code.
func Check(code int) int {
	if code == 0 {
		if err := goleak.Find(ignored...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}
