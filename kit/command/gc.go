package command

import "runtime/debug"

// TuneGC sets the process's GC target to percent unless getenv has GOGC, and its soft memory
// limit to limit bytes (0: none) unless getenv has GOMEMLIMIT: an operator's setting wins. A
// service calls it as it starts serving, with the defaults that suit its heap.
func TuneGC(getenv func(string) string, percent int, limit int64) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(percent)
	}
	if limit > 0 && getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(limit)
	}
}
