package loadtest

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat: USER_HZ, 100 on every Linux
// architecture Go supports (the kernel converts to it whatever its own tick is).
const userHZ = 100

// ProcessCPU is the processor time one process of the stack (or the Postgres server, with
// every process it started, or the load generator itself) spent during the latency
// scenario's rounds, per round (the sessions scenario's, per spend, is SpendCPU).
type ProcessCPU struct {
	Process  string `json:"process"`
	PerRound Millis `json:"per_round_ms"`
	// GOMAXPROCS is the process's setting as its environment gives it ("default" when it
	// gives none, "unknown" when it cannot be read, "" for the Postgres server); for the load
	// generator, the value it runs with.
	GOMAXPROCS string `json:"gomaxprocs,omitempty"`
	Err        string `json:"error,omitempty"`
}

// watched is one process the watch measures: found by the address it listens on, or this
// process; with tree, every process it started too (a Postgres server's backends and
// workers), and then it must be named comm.
type watched struct {
	name, addr string
	self, tree bool
	comm       string
}

// cpuWatch measures the CPU time of a set of processes between its start and stop.
type cpuWatch struct {
	procs         []watched
	roots         []int // per process: its pid, 0 when it was not found
	before        []treeTimes
	maxProcs      []string // per process: its GOMAXPROCS (ProcessCPU.GOMAXPROCS)
	errs          []string
	started, done time.Time
}

// treeTimes is the CPU time of a process and, for a tree, of each of its children, and of
// the children it has reaped.
type treeTimes struct {
	self   map[int]time.Duration // each live process: its own CPU time so far
	reaped time.Duration         // the root's reaped children, all of their time (cutime + cstime)
}

// newCPUWatch finds each process and reads its CPU time so far. This process is read first
// and last, so that the watch's own reading of the others is not counted as its.
func newCPUWatch(procs []watched) *cpuWatch {
	w := &cpuWatch{procs: procs, roots: make([]int, len(procs)), before: make([]treeTimes, len(procs)),
		maxProcs: make([]string, len(procs)), errs: make([]string, len(procs))}
	for _, i := range w.readOrder() {
		p := procs[i]
		root := os.Getpid()
		if !p.self {
			var err error
			if root, err = pidListening(p.addr); err != nil {
				w.errs[i] = err.Error()
				continue
			}
		}
		if p.comm != "" {
			if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", root)); err != nil || strings.TrimSpace(string(comm)) != p.comm {
				w.errs[i] = fmt.Sprintf("the process listening on %s is not %s", p.addr, p.comm)
				continue
			}
		}
		times, err := readTree(root, p.tree)
		if err != nil {
			w.errs[i] = err.Error()
			continue
		}
		w.roots[i], w.before[i] = root, times
		switch {
		case p.self:
			w.maxProcs[i] = strconv.Itoa(runtime.GOMAXPROCS(0))
		case !p.tree:
			w.maxProcs[i] = gomaxprocsOf(root)
		}
	}
	w.started = time.Now()
	return w
}

// readOrder lists this process first.
func (w *cpuWatch) readOrder() []int {
	order := make([]int, 0, len(w.procs))
	for i, p := range w.procs {
		if p.self {
			order = append([]int{i}, order...)
		} else {
			order = append(order, i)
		}
	}
	return order
}

// cpuSpent is one process's CPU time over a watch's window.
type cpuSpent struct {
	process    string
	gomaxprocs string // ProcessCPU.GOMAXPROCS
	spent      time.Duration
	err        string // why it could not be measured
}

// stop reads each process's CPU time again and returns what each spent since the start.
func (w *cpuWatch) stop() []cpuSpent {
	w.done = time.Now()
	out := make([]cpuSpent, len(w.procs))
	for _, i := range w.readOrder() {
		out[i] = cpuSpent{process: w.procs[i].name, gomaxprocs: w.maxProcs[i], err: w.errs[i]}
		if w.errs[i] != "" {
			continue
		}
		now, err := readTree(w.roots[i], w.procs[i].tree)
		if err != nil {
			out[i].err = err.Error()
			continue
		}
		out[i].spent = spentBetween(w.before[i], now, w.roots[i])
	}
	return out
}

// stackProcesses are the processes whose CPU time the latency and sessions scenarios measure:
// the stack's four, the Postgres server with every process it started, and the load generator.
func stackProcesses(cfg Config, t *target) []watched {
	return []watched{
		{name: "router", addr: t.router}, {name: "hubu", addr: t.hubu}, {name: "gongbu", addr: t.gongbu},
		{name: "mockflux", addr: t.flux}, {name: "postgres", addr: serverAddr(cfg.ServerURL), tree: true, comm: "postgres"},
		{name: "load generator", self: true},
	}
}

// perRound is the latency scenario's CPU time of each process, divided by its rounds.
func perRound(spent []cpuSpent, rounds int) []ProcessCPU {
	out := make([]ProcessCPU, len(spent))
	for i, c := range spent {
		out[i] = ProcessCPU{Process: c.process, GOMAXPROCS: c.gomaxprocs, Err: c.err}
		if c.err == "" && rounds > 0 {
			out[i].PerRound = Millis(c.spent / time.Duration(rounds))
		}
	}
	return out
}

// SpendCPU is the processor time one process (as ProcessCPU) spent over the sessions scenario,
// per succeeded spend, and its share of what all the processes measured spent.
type SpendCPU struct {
	Process    string  `json:"process"`
	PerSpend   Millis  `json:"per_spend_ms"`
	Share      float64 `json:"share"` // from 0 to 1
	GOMAXPROCS string  `json:"gomaxprocs,omitempty"`
	Err        string  `json:"error,omitempty"`
}

// perSpend is the sessions scenario's CPU time of each process, divided by the succeeded
// spends, with each one's share; and the sum of them all (0 when no spend succeeded or no
// process could be read).
func perSpend(spent []cpuSpent, spends int) (each []SpendCPU, all Millis) {
	var total time.Duration
	for _, c := range spent {
		if c.err == "" {
			total += c.spent
		}
	}
	each = make([]SpendCPU, len(spent))
	for i, c := range spent {
		each[i] = SpendCPU{Process: c.process, GOMAXPROCS: c.gomaxprocs, Err: c.err}
		if c.err != "" || spends <= 0 {
			continue
		}
		each[i].PerSpend = Millis(c.spent / time.Duration(spends))
		if total > 0 {
			each[i].Share = math.Round(float64(c.spent)/float64(total)*1000) / 1000
		}
	}
	if spends > 0 {
		all = Millis(total / time.Duration(spends))
	}
	return each, all
}

// spentBetween is the CPU time a process tree spent between two readings: each live process's
// time since the first (all of it for one started meanwhile), and the time of the children
// reaped meanwhile, less what those that were already running had spent by the first.
func spentBetween(before, after treeTimes, root int) time.Duration {
	spent := after.reaped - before.reaped
	for pid, t := range after.self {
		spent += t - before.self[pid]
	}
	for pid, t := range before.self {
		if _, alive := after.self[pid]; !alive && pid != root {
			spent -= t
		}
	}
	return spent
}

// readTree reads the CPU times of process root and, with tree, of its children.
func readTree(root int, tree bool) (treeTimes, error) {
	own, reaped, err := cpuTime(root)
	if err != nil {
		return treeTimes{}, err
	}
	times := treeTimes{self: map[int]time.Duration{root: own}}
	if tree {
		times.reaped = reaped
		for _, pid := range childrenOf(root) {
			if t, _, err := cpuTime(pid); err == nil { // one that ended meanwhile is in reaped next time
				times.self[pid] = t
			}
		}
	}
	return times, nil
}

// cpuTime is the user and system CPU time of process pid so far, and that of its children it
// has waited for.
func cpuTime(pid int) (own, reaped time.Duration, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime, stime, cutime and cstime (fields 14 to 17) from the text of
// /proc/<pid>/stat. The command name (field 2) is in parentheses and may hold spaces and
// parentheses itself, so the fields are counted from the last ')'.
func parseStatCPU(stat string) (own, reaped time.Duration, err error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, 0, fmt.Errorf("no command name in %q", stat)
	}
	fields := strings.Fields(stat[end+1:]) // fields[0] is field 3, the state
	if len(fields) < 15 {
		return 0, 0, fmt.Errorf("too few fields in %q", stat)
	}
	var ticks [4]int64
	for i, f := range fields[11:15] {
		if ticks[i], err = strconv.ParseInt(f, 10, 64); err != nil || ticks[i] < 0 {
			return 0, 0, fmt.Errorf("bad CPU time %q", f)
		}
	}
	tick := time.Second / userHZ
	return time.Duration(ticks[0]+ticks[1]) * tick, time.Duration(ticks[2]+ticks[3]) * tick, nil
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

// childrenOf lists the processes whose parent is pid.
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

// gomaxprocsOf is the GOMAXPROCS that process pid's environment sets: "default" when it sets
// none, "unknown" when the environment cannot be read.
func gomaxprocsOf(pid int) string {
	v, err := environValue(pid, "GOMAXPROCS")
	switch {
	case err != nil:
		return "unknown"
	case v == "":
		return "default"
	}
	return v
}

// environValue is the value of the variable key in the environment process pid started with,
// "" when it has none.
func environValue(pid int, key string) (string, error) {
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return "", err
	}
	for kv := range strings.SplitSeq(string(env), "\x00") {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v, nil
		}
	}
	return "", nil
}
