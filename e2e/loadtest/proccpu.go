package loadtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat: USER_HZ, 100 on every Linux
// architecture Go supports (the kernel converts to it whatever its own tick is).
const userHZ = 100

// ProcessCPU is the processor time one process of the stack (or the Postgres server, with
// every process it started, or the load generator itself) spent during the latency
// scenario's rounds, per round.
type ProcessCPU struct {
	Process  string `json:"process"`
	PerRound Millis `json:"per_round_ms"`
	Err      string `json:"error,omitempty"`
}

// cpuWatch measures the CPU time of a set of processes between its start and perRound.
type cpuWatch struct {
	names  []string
	roots  []int                   // per name: the process found, 0 when none was
	before []map[int]time.Duration // per name: the CPU time of each of its processes at the start
	errs   []string
}

// newCPUWatch finds each process by the address it listens on (the load generator is this
// process) and reads its CPU time so far; for postgres, that of the server and every process
// it started (its backends and workers).
func newCPUWatch(listening map[string]string, order []string) *cpuWatch {
	w := &cpuWatch{names: order, roots: make([]int, len(order)), before: make([]map[int]time.Duration, len(order)), errs: make([]string, len(order))}
	for i, name := range order {
		root := os.Getpid()
		if name != "load generator" {
			var err error
			if root, err = pidListening(listening[name]); err != nil {
				w.errs[i] = err.Error()
				continue
			}
		}
		w.roots[i] = root
		w.before[i] = w.times(name, root)
	}
	return w
}

// times reads the CPU time of the process root and, for postgres, of its children.
func (w *cpuWatch) times(name string, root int) map[int]time.Duration {
	pids := []int{root}
	if name == "postgres" {
		pids = append(pids, childrenOf(root)...)
	}
	times := make(map[int]time.Duration, len(pids))
	for _, pid := range pids {
		if t, err := cpuTime(pid); err == nil {
			times[pid] = t
		}
	}
	return times
}

// perRound is each process's CPU time since newCPUWatch, divided by rounds. A Postgres process
// that started meanwhile counts all of its time, and one that ended meanwhile what it had
// spent by the start and no more (its last moments are lost: a few, with pooled connections).
func (w *cpuWatch) perRound(rounds int) []ProcessCPU {
	out := make([]ProcessCPU, len(w.names))
	for i, name := range w.names {
		out[i] = ProcessCPU{Process: name, Err: w.errs[i]}
		if w.errs[i] != "" || rounds <= 0 {
			continue
		}
		now := w.times(name, w.roots[i])
		if _, ok := now[w.roots[i]]; !ok {
			out[i].Err = fmt.Sprintf("process %d is gone", w.roots[i])
			continue
		}
		var spent time.Duration
		for pid, t := range now {
			spent += t - w.before[i][pid] // 0 for a process that started meanwhile
		}
		out[i].PerRound = Millis(spent / time.Duration(rounds))
	}
	return out
}

// cpuTime is the user and system CPU time of process pid so far.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime and stime (fields 14 and 15) from the text of /proc/<pid>/stat.
// The command name (field 2) is in parentheses and may hold spaces and parentheses itself,
// so the fields are counted from the last ')'.
func parseStatCPU(stat string) (time.Duration, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("no command name in %q", stat)
	}
	fields := strings.Fields(stat[end+1:]) // fields[0] is field 3, the state
	if len(fields) < 13 {
		return 0, fmt.Errorf("too few fields in %q", stat)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bad CPU time %q", f)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// parentOf reads the parent's pid (field 4) from the text of /proc/<pid>/stat.
func parentOf(stat string) (int, bool) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, false
	}
	fields := strings.Fields(stat[end+1:])
	if len(fields) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(fields[1])
	return ppid, err == nil
}

// childrenOf lists the processes whose parent is pid (a Postgres server's backends and
// workers).
func childrenOf(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var children []int
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(string(b)); ok && ppid == pid {
			if child, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
				children = append(children, child)
			}
		}
	}
	return children
}
