package command

import (
	"math"
	"runtime/debug"
	"testing"
)

// The defaults hold unless GOGC or GOMEMLIMIT is set; a limit of 0 sets none. Not parallel:
// the settings are the process's.
func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	for _, c := range []struct {
		env         map[string]string
		limit       int64
		wantPercent int
		wantLimit   int64
	}{
		{nil, 48 << 20, 400, 48 << 20},
		{map[string]string{"GOGC": "150"}, 48 << 20, 100, 48 << 20},
		{map[string]string{"GOMEMLIMIT": "1GiB"}, 48 << 20, 400, math.MaxInt64},
		{nil, 0, 400, math.MaxInt64},
	} {
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(math.MaxInt64)
		TuneGC(func(k string) string { return c.env[k] }, 400, c.limit)
		if got := debug.SetGCPercent(100); got != c.wantPercent {
			t.Errorf("%v, limit %d: GC percent %d, want %d", c.env, c.limit, got, c.wantPercent)
		}
		if got := debug.SetMemoryLimit(-1); got != c.wantLimit {
			t.Errorf("%v, limit %d: memory limit %d, want %d", c.env, c.limit, got, c.wantLimit)
		}
	}
}
