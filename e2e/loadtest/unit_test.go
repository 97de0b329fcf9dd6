package loadtest

import (
	"bufio"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/kit/waitfor"
	"hubu.dev/hubu/proto/contract"
)

func TestNewDist(t *testing.T) {
	ms := func(n ...int) []time.Duration {
		out := make([]time.Duration, len(n))
		for i, v := range n {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	upTo := func(n int) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = time.Duration(n-i) * time.Millisecond // descending: NewDist must sort
		}
		return out
	}
	for _, tc := range []struct {
		name                  string
		samples               []time.Duration
		lo, p50, p95, p99, hi time.Duration
	}{
		{"one sample", ms(7), 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond},
		{"100 samples: nearest rank", upTo(100), time.Millisecond, 50 * time.Millisecond, 95 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond},
		{"200 samples: p99 is the second largest", upTo(200), time.Millisecond, 100 * time.Millisecond, 190 * time.Millisecond, 198 * time.Millisecond, 200 * time.Millisecond},
		{"an even count: p50 is the lower middle, never an average", ms(1, 2, 3, 4), time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDist(tc.samples)
			got := []time.Duration{time.Duration(d.Min), time.Duration(d.P50), time.Duration(d.P95), time.Duration(d.P99), time.Duration(d.Max)}
			want := []time.Duration{tc.lo, tc.p50, tc.p95, tc.p99, tc.hi}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("min, p50, p95, p99, max = %v, want %v", got, want)
				}
			}
			if d.N != len(tc.samples) || time.Duration(d.Samples[0]) != tc.samples[0] {
				t.Fatalf("the samples are not kept in the order taken: %+v", d)
			}
		})
	}
	if d := NewDist(nil); d.N != 0 || d.P50 != 0 || d.Samples == nil {
		t.Fatalf("no samples: %+v", d)
	}
}

func TestRatio(t *testing.T) {
	if r := ratio(3, 0); r.Valid || r.String() != "n/a" {
		t.Fatalf("a ratio to nothing: %+v", r)
	}
	if b, _ := ratio(1, 0).MarshalJSON(); string(b) != "null" {
		t.Fatalf("a ratio to nothing in JSON: %s", b)
	}
	if r := ratio(3, 2); !r.Valid || r.Value != 1.5 || r.String() != "1.50×" {
		t.Fatalf("3 ÷ 2: %+v %s", r, r)
	}
}

func TestParseStatus(t *testing.T) {
	status := "Name:\thubu\nVmPeak:\t 1263508 kB\nVmHWM:\t   24346 kB\nVmRSS:\t   20000 kB\nThreads:\t8\n"
	m, err := parseStatus(status)
	if err != nil || m.PeakBytes != 24346*1024 || m.CurrentBytes != 20000*1024 {
		t.Fatalf("parseStatus = %+v, %v", m, err)
	}
	for _, bad := range []string{"Name:\tkthreadd\nThreads:\t1\n", "VmHWM:\t 12 MB\nVmRSS:\t 1 kB\n", "VmHWM:\t x kB\nVmRSS:\t 1 kB\n"} {
		if _, err := parseStatus(bad); err == nil {
			t.Errorf("parseStatus(%q) took it", bad)
		}
	}
}

// Only the mappings of the binary count, not those of the libraries or anonymous memory.
func TestMappedRSS(t *testing.T) {
	smaps := `00400000-0100a000 r-xp 00000000 fe:01 123 /opt/hubu/bin/hubu unified
Size:              12328 kB
Rss:               10212 kB
VmFlags: rd ex mr mw me dw sd
0100a000-01e48000 r--p 00c0a000 fe:01 123 /opt/hubu/bin/hubu unified
Rss:                8248 kB
01f03000-03f52000 rw-p 00000000 00:00 0
Rss:                 168 kB
7f0000000000-7f0000100000 r-xp 00000000 fe:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                1092 kB
`
	if got, err := mappedRSS(smaps, "/opt/hubu/bin/hubu unified"); err != nil || got != (10212+8248)*1024 {
		t.Fatalf("mappedRSS = %d, %v", got, err)
	}
	if _, err := mappedRSS(smaps, "/opt/other"); err == nil {
		t.Error("a binary with no mapping was measured")
	}
	// This process: its binary is mapped, and resident, and not all of its memory.
	m, err := readMemory(os.Getpid())
	if err != nil || m.BinaryBytes <= 0 || m.BinaryBytes >= m.CurrentBytes {
		t.Fatalf("readMemory(self) = %+v, %v", m, err)
	}
}

func TestParseStatCPU(t *testing.T) {
	// The command name may hold spaces and parentheses; utime 250 and stime 50 ticks are 3 s,
	// cutime 20 and cstime 30 of reaped children 0.5 s.
	stat := "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 20 30 20 0 8 0 123 456 789"
	if own, reaped, err := parseStatCPU(stat); err != nil || own != 3*time.Second || reaped != 500*time.Millisecond {
		t.Fatalf("parseStatCPU = %v, %v, %v", own, reaped, err)
	}
	if ppid, ok := parentOf(stat); !ok || ppid != 1 {
		t.Fatalf("parentOf = %d, %v", ppid, ok)
	}
	for _, bad := range []string{"4242 no parentheses", "4242 (x) S 1 2", "4242 (x) S 1 4242 4242 0 -1 0 0 0 0 0 -5 50 0 0"} {
		if _, _, err := parseStatCPU(bad); err == nil {
			t.Errorf("parseStatCPU(%q) took it", bad)
		}
	}
}

// A watch of a process tree (as of the Postgres server and its backends) counts the time of a
// child that ran and ended in between, and of one still running; a process listening where
// nobody listens, or one of another name, is an error.
func TestCPUWatch(t *testing.T) {
	burn := func() *exec.Cmd { // a shell that spins for a while, then waits for its stdin to close
		return exec.Command("sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; read x || true")
	}
	w := newCPUWatch([]watched{{name: "nobody", addr: "127.0.0.1:1"}, {name: "tree", self: true, tree: true}})

	ended := burn()
	ended.Stdin = strings.NewReader("")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	endedCPU := ended.ProcessState.UserTime() + ended.ProcessState.SystemTime()

	running := burn()
	startWaiting(t, running)
	var runningCPU time.Duration
	waitfor.Within(20*time.Second, func() bool {
		runningCPU, _, _ = cpuTime(running.Process.Pid)
		return runningCPU >= 50*time.Millisecond
	})

	got := perRound(w.stop(), 1)
	if got[0].Err == "" || got[0].Process != "nobody" {
		t.Errorf("a process nobody runs: %+v", got[0])
	}
	if runningCPU < 50*time.Millisecond || endedCPU <= 0 {
		t.Fatalf("the children did not burn: %s running, %s ended", runningCPU, endedCPU)
	}
	// /proc counts in ticks and truncates; the kernel's own count of the ended child does not.
	if got[1].Err != "" || time.Duration(got[1].PerRound) < endedCPU+runningCPU-2*time.Second/userHZ {
		t.Errorf("the tree: %+v, want at least the ended child's %s and the running one's %s", got[1], endedCPU, runningCPU)
	}
	if w.done.Before(w.started) {
		t.Errorf("the window ends at %s, before it starts at %s", w.done, w.started)
	}

	if got[1].GOMAXPROCS != strconv.Itoa(runtime.GOMAXPROCS(0)) {
		t.Errorf("the load generator's GOMAXPROCS: %q, want %d", got[1].GOMAXPROCS, runtime.GOMAXPROCS(0))
	}

	other := newCPUWatch([]watched{{name: "postgres", addr: listening(t), comm: "postgres"}})
	if got := perRound(other.stop(), 1); got[0].Err == "" || !strings.Contains(got[0].Err, "is not postgres") {
		t.Errorf("a process of another name: %+v", got[0])
	}
}

// TestEnvironValue reads GOMAXPROCS from another process's environment.
func TestEnvironValue(t *testing.T) {
	child := exec.Command("sh", "-c", "echo running; read x || true")
	child.Env = []string{"PATH=" + os.Getenv("PATH"), "GOMAXPROCS=3"}
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	startWaiting(t, child)
	// Start returns while the kernel may still be setting up the new program, its environment
	// not yet readable; a line the shell wrote says it is running.
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "running\n" {
		t.Fatalf("the child: %q, %v", line, err)
	}
	if got := gomaxprocsOf(child.Process.Pid); got != "3" {
		t.Errorf("GOMAXPROCS: %q, want 3", got)
	}
	if got, err := environValue(child.Process.Pid, "GOGC"); got != "" || err != nil {
		t.Errorf("a variable it does not have: %q, %v", got, err)
	}
	if got := gomaxprocsOf(-1); got != "unknown" {
		t.Errorf("no such process: %q, want unknown", got)
	}
	if got := gomaxprocsOf(os.Getpid()); got != cmp.Or(os.Getenv("GOMAXPROCS"), "default") {
		t.Errorf("this process: %q, want what its environment says", got)
	}
}

// startWaiting starts cmd, which runs until its standard input closes, and closes it when the
// test ends.
func startWaiting(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
}

// listening is the address of a listener this test process holds until the test ends.
func listening(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

func TestListeningInode(t *testing.T) {
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 111 1 0 20 4 30 10 -1
   1: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 222 1 0 100 0 0 10 0
   2: 00000000:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 333 1 0 100 0 0 10 0
   3: 0200007F:1F92 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 444 1 0 100 0 0 10 0
`
	loopback := net.ParseIP("127.0.0.1")
	for _, tc := range []struct {
		port uint16
		want string
	}{
		{8080, "222"}, // the listening socket, not the established one on the same port
		{8081, "333"}, // the wildcard address
		{8082, ""},    // 127.0.0.2, not ours
		{9999, ""},
	} {
		if got := listeningInode(table, loopback, tc.port); got != tc.want {
			t.Errorf("port %d: inode %q, want %q", tc.port, got, tc.want)
		}
	}
	tcp6 := "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 555 1 0 100 0 0 10 0\n"
	if got := listeningInode(tcp6, net.ParseIP("::1"), 8080); got != "555" {
		t.Errorf("tcp6 ::1: inode %q", got)
	}
}

func TestPidListening(t *testing.T) {
	// The load generator reads memory and sockets from Linux's /proc, and only there.
	if runtime.GOOS != "linux" {
		t.Skip("the load generator measures through /proc, which only Linux has")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pid, err := pidListening(ln.Addr().String())
	if err != nil || pid != os.Getpid() {
		t.Fatalf("pidListening = %d, %v; want this process, %d", pid, err, os.Getpid())
	}
	m, err := readMemory(pid)
	if err != nil || m.PeakBytes <= 0 || m.CurrentBytes <= 0 {
		t.Fatalf("readMemory = %+v, %v", m, err)
	}
	ln.Close()
	if _, err := pidListening(ln.Addr().String()); err == nil {
		t.Fatal("found a process listening on a closed port")
	}
}

func TestParsePgbench(t *testing.T) {
	out := `pgbench (15.20 (Debian 15.20-0+deb12u1))
starting vacuum...end.
transaction type: <builtin: simple update>
number of clients: 2
number of transactions actually processed: 3254
latency average = 0.612 ms
initial connection time = 6.741 ms
tps = 3267.409448 (without initial connection time)
`
	r, err := parsePgbench(out)
	if err != nil || r.TPS != 3267.409448 || time.Duration(r.LatencyAverage) != 612*time.Microsecond {
		t.Fatalf("parsePgbench = %+v, %v", r, err)
	}
	for _, bad := range []string{"FATAL: database does not exist\n", "tps = 0.000000 (without initial connection time)\n"} {
		if _, err := parsePgbench(bad); err == nil {
			t.Errorf("parsePgbench(%q) took it", bad)
		}
	}
}

func TestJobID(t *testing.T) {
	id, err := jobID("http://127.0.0.1:8083/samples/0f2b9c7e-1d2a-4a8e-9d3c-5b7e6f1a2b3c.png?exp=1760000000&sig=ab12")
	if err != nil || id != "0f2b9c7e-1d2a-4a8e-9d3c-5b7e6f1a2b3c" {
		t.Fatalf("jobID = %q, %v", id, err)
	}
	for _, bad := range []string{"http://127.0.0.1/images/x.png", "http://127.0.0.1/samples/.png", "http://127.0.0.1/samples/noext", "::"} {
		if id, err := jobID(bad); err == nil {
			t.Errorf("jobID(%q) = %q", bad, id)
		}
	}
}

func TestRequestHash(t *testing.T) {
	got, err := requestHash(contract.ImageRequest{Prompt: "a fox", Model: "flux-schnell", Width: 512, Height: 768})
	if err != nil {
		t.Fatal(err)
	}
	// The canonical form, written out: keys sorted, no spaces.
	want := sha256.Sum256([]byte("generate_image\x00" + `{"height":768,"model":"flux-schnell","prompt":"a fox","width":512}`))
	if got != hex.EncodeToString(want[:]) {
		t.Fatalf("requestHash = %s", got)
	}
}

func TestParseArgs(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{"HUBU_LOADTEST_DATABASE_URL": "postgres://localhost/postgres"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	c, err := ParseArgs(nil, env(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Calls != 200 || c.Sessions != 200 || c.Spends != 10 || c.Clients != 8 || c.Agents != 16 || c.Duration != 10*time.Second ||
		c.PgbenchScale != 10 || c.RenderTime != 0 || c.Name != "loadtest" || strings.Join(c.Scenarios, ",") != "latency,hubu,sessions" ||
		c.PathSpends != 50 || c.ServiceProcs != max(1, runtime.NumCPU()/4) || c.ProviderIgnoresKeys {
		t.Fatalf("defaults: %+v", c)
	}
	if c, err := ParseArgs(nil, env("HUBU_LOADTEST_PROVIDER_IGNORES_KEYS", "true"), nil); err != nil || !c.ProviderIgnoresKeys {
		t.Fatalf("HUBU_LOADTEST_PROVIDER_IGNORES_KEYS=true: %+v, %v", c, err)
	}
	if c, err := ParseArgs([]string{"--service-procs", "0"}, env(), nil); err != nil || c.ServiceProcs != 0 {
		t.Fatalf("--service-procs 0 (Go's default): %+v, %v", c, err)
	}
	c, err = ParseArgs([]string{"--scenarios", "sessions, latency", "--spends", "3"}, env("HUBU_LOADTEST_SESSIONS", "50", "HUBU_LOADTEST_SPENDS", "7"), nil)
	if err != nil || c.Sessions != 50 || c.Spends != 3 || strings.Join(c.Scenarios, ",") != "sessions,latency" {
		t.Fatalf("flags over variables: %+v, %v", c, err)
	}
	for _, tc := range []struct {
		args []string
		env  func(string) string
		want string
	}{
		{nil, func(string) string { return "" }, "--database-url"},
		{[]string{"--scenarios", "latency,speed"}, env(), `unknown scenario "speed"`},
		{[]string{"--scenarios", ","}, env(), "at least one"},
		{[]string{"--duration", "1500ms"}, env(), "whole number of seconds"},
		{[]string{"--sessions", "0"}, env(), "--sessions must be at least 1"},
		{[]string{"--scenarios", "path", "--path-spends", "0"}, env(), "--path-spends must be at least 1"},
		{[]string{"--name", "Load-Test"}, env(), "--name"},
		{[]string{"--render-time", "-1s"}, env(), "--render-time"},
		{[]string{"--service-procs", "-1"}, env(), "--service-procs"},
		{nil, env("HUBU_LOADTEST_N", "many"), "HUBU_LOADTEST_N"},
		{[]string{"extra"}, env(), "unexpected argument"},
	} {
		if _, err := ParseArgs(tc.args, tc.env, &strings.Builder{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseArgs(%q) = %v, want an error about %s", tc.args, err, tc.want)
		}
	}
}

// TestStackEnv checks that every Go service of a stack gets ServiceProcs as its GOMAXPROCS,
// beside the variables it had, and that 0 sets none.
func TestStackEnv(t *testing.T) {
	extra := map[string][]string{"mockflux": {"MOCKFLUX_RENDER_TIME=0s"}, "router": {"A=1"}}
	env := Config{ServiceProcs: 2}.stackEnv(extra)
	for _, name := range []string{"router", "hubu", "gongbu", "mockflux"} {
		if !slices.Contains(env[name], "GOMAXPROCS=2") {
			t.Errorf("%s: %q, want GOMAXPROCS=2", name, env[name])
		}
	}
	if !slices.Contains(env["mockflux"], "MOCKFLUX_RENDER_TIME=0s") || !slices.Contains(env["router"], "A=1") || len(extra["router"]) != 1 {
		t.Errorf("the extra variables: %q (extra now %q)", env, extra)
	}
	for name, kv := range (Config{}).stackEnv(extra) {
		if slices.ContainsFunc(kv, func(v string) bool { return strings.HasPrefix(v, "GOMAXPROCS=") }) {
			t.Errorf("%s: %q, want no GOMAXPROCS at 0", name, kv)
		}
	}
}

// TestServiceProcsHeader checks that the report's first line says what GOMAXPROCS the stack's
// services ran with, and says nothing of them when no scenario started them.
func TestServiceProcsHeader(t *testing.T) {
	for _, tc := range []struct {
		c    reportConfig
		want string
	}{
		{reportConfig{Scenarios: []string{ScenarioHubu}, ServiceProcs: 1}, ""},
		{reportConfig{Scenarios: []string{ScenarioHubu, ScenarioLatency}, ServiceProcs: 1}, "; router, Hubu, Gongbu and mockflux at GOMAXPROCS=1"},
		{reportConfig{Scenarios: []string{ScenarioSessions}}, "; router, Hubu, Gongbu and mockflux at Go's default GOMAXPROCS"},
	} {
		if got := tc.c.serviceProcs(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.c, got, tc.want)
		}
	}
}

// TestJudge checks what fails a run: a correctness check (errors, charges that do not match
// the spends), never a missed performance target.
func TestJudge(t *testing.T) {
	dist := func(d time.Duration) Dist { return NewDist([]time.Duration{d}) }
	healthy := func() *Report {
		return &Report{
			Latency: &LatencyReport{Calls: 2, Charges: 2, ToolsList: dist(time.Millisecond), Spend: dist(time.Second),
				Redelivery: dist(time.Millisecond), Overhead: dist(time.Second),
				SpendOverFloor: ratio(1000, 1), RedeliveryOverFloor: ratio(1, 1)},
			Sessions: &SessionsReport{ChargesExpected: 4, ChargesMade: 4, Succeeded: 4, PerSecond: 3, Latency: dist(time.Second),
				Memory: []ServiceMemory{{Service: "router", Pid: 1, Memory: Memory{PeakBytes: 61e6, CurrentBytes: 1}}}},
			Hubu: &HubuReport{Agents: 16, Clients: 8, Spread: &Throughput{}, Hot: &Throughput{}, PgbenchSkipped: "pgbench is not installed"},
		}
	}
	r := healthy()
	r.judge()
	if r.Failed() {
		t.Fatalf("slow but correct runs fail: %+v", r.Checks)
	}
	status := map[string]string{}
	for _, c := range r.Checks {
		status[c.Scenario+": "+c.Figure] = c.Status
	}
	for figure, want := range map[string]string{
		"latency: spend overhead p50": notMet, "latency: redelivery ÷ transport floor, p50": met, "sessions: router peak RSS": notMet,
		"sessions: spend latency p99": met, "hubu: hot agent ÷ pgbench -N -c 1": na, "latency: charges at mockflux": met,
		"latency: new spend ÷ contract floor, p50": na, // no contract floor measured
		"sessions: CPU per spend, all processes":   na, // no CPU measured
	} {
		if status[figure] != want {
			t.Errorf("%s: %q, want %q", figure, status[figure], want)
		}
	}
	// The transport floor's ratio to a new spend is a figure without a target now.
	if _, ok := status["latency: spend ÷ transport floor, p50"]; ok {
		t.Errorf("spend ÷ transport floor is judged: %+v", r.Checks)
	}

	for name, spoil := range map[string]func(*Report){
		"a charge too many in latency": func(r *Report) { r.Latency.Charges = 3 },
		"an error in latency":          func(r *Report) { r.Latency.Errors.add("status running") },
		"a charge missing in sessions": func(r *Report) { r.Sessions.ChargesMade = 3 },
		"an error in sessions":         func(r *Report) { r.Sessions.Errors.add("transport: EOF") },
		"an error in Hubu's hot load":  func(r *Report) { r.Hubu.Hot.Errors.add("HTTP 500") },
		"an error in Hubu's wide load": func(r *Report) { r.Hubu.Spread.Errors.add("HTTP 409") },
	} {
		r := healthy()
		spoil(r)
		r.judge()
		if !r.Failed() {
			t.Errorf("%s: the run passes", name)
		}
	}
}

// TestTargets checks each figure against the targets of issue 29, just within and just
// beyond each, and the sessions scenario's own targets through a running stack.
func TestTargets(t *testing.T) {
	dist := func(d time.Duration) Dist { return NewDist([]time.Duration{d}) }
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	report := func(within bool, stack bool) *Report {
		pick := func(in, out float64) float64 {
			if within {
				return in
			}
			return out
		}
		r := &Report{
			Latency: &LatencyReport{Calls: 1, Charges: 1, ToolsList: dist(time.Millisecond),
				Overhead:            Dist{N: 1, P50: Millis(ms(pick(8, 8.1))), P99: Millis(ms(pick(25, 25.1)))},
				SpendOverFloor:      ratio(100, 1), // no target: never judged, however large
				RedeliveryOverFloor: ratio(pick(1.25, 1.26), 1),
				ContractFloor:       &ContractFloor{SpendOverFloor: ratio(pick(3, 3.01), 1)}},
			Hubu: &HubuReport{Agents: 16, Clients: 8, Spread: &Throughput{}, Hot: &Throughput{},
				SpreadOverPgbench: ratio(pick(0.6, 0.59), 1), HotOverPgbench1: ratio(pick(0.5, 0.49), 1)},
			Sessions: &SessionsReport{ChargesExpected: 1, ChargesMade: 1, Succeeded: 1, Latency: Dist{N: 1},
				Memory: []ServiceMemory{
					{Service: "router", Pid: 1, Memory: Memory{PeakBytes: int64(pick(60e6, 60e6+1))}},
					{Service: "hubu", Pid: 2, Memory: Memory{PeakBytes: int64(pick(80e6, 80e6+1))}},
					{Service: "gongbu", Pid: 3, Memory: Memory{PeakBytes: int64(pick(80e6, 80e6+1))}},
				},
				CPU:         []SpendCPU{{Process: "router", PerSpend: Millis(4 * time.Millisecond), Share: 1}, {Process: "postgres", Err: "permission denied"}},
				CPUPerSpend: Millis(4 * time.Millisecond)},
		}
		if stack {
			r.Stack = &StackReport{}
			r.Sessions.PerSecond = pick(100, 99.9)
			r.Sessions.Latency.P99 = Millis(ms(pick(3000, 3001)))
		} else {
			r.Sessions.PerSecond = pick(120, 119.9)
			r.Sessions.Latency.P99 = Millis(ms(pick(2500, 2501)))
		}
		r.judge()
		return r
	}
	want := map[string]string{
		"latency: spend overhead p50":                "≤ 8ms",
		"latency: spend overhead p99":                "≤ 25ms",
		"latency: new spend ÷ contract floor, p50":   "≤ 3×",
		"latency: redelivery ÷ transport floor, p50": "≤ 1.25×",
		"hubu: 16 agents ÷ pgbench -N -c 8":          "≥ 0.6×",
		"hubu: hot agent ÷ pgbench -N -c 1":          "≥ 0.5×",
		"sessions: spends per second":                "≥ 120",
		"sessions: spend latency p99":                "≤ 2.5s",
		"sessions: router peak RSS":                  "≤ 60.0 MB",
		"sessions: hubu peak RSS":                    "≤ 80.0 MB",
		"sessions: gongbu peak RSS":                  "≤ 80.0 MB",
	}
	onStack := map[string]string{
		"sessions: spends per second": "≥ 100 (through a running stack)",
		"sessions: spend latency p99": "≤ 3s (through a running stack)",
	}
	for _, stack := range []bool{false, true} {
		for _, within := range []bool{true, false} {
			r := report(within, stack)
			if r.Failed() {
				t.Fatalf("a missed target fails the run: %+v", r.Checks)
			}
			checks := map[string]Check{}
			for _, c := range r.Checks {
				checks[c.Scenario+": "+c.Figure] = c
			}
			for figure, target := range want {
				if stack {
					if !strings.HasPrefix(figure, "sessions: ") {
						continue
					}
					target = cmp.Or(onStack[figure], target)
				}
				wantStatus := notMet
				if within {
					wantStatus = met
				}
				if c, ok := checks[figure]; !ok || c.Target != target || c.Status != wantStatus {
					t.Errorf("stack %v, within %v: %s: %+v, want target %q, %s", stack, within, figure, c, target, wantStatus)
				}
			}
			// CPU per spend is read across runs: printed with its target, never judged.
			if c := checks["sessions: CPU per spend, all processes"]; c.Status != unjudged || c.Value != "4.00ms (all but postgres)" ||
				!strings.Contains(c.Target, "compare across runs") {
				t.Errorf("CPU per spend: %+v", c)
			}
			if _, ok := checks["latency: spend ÷ transport floor, p50"]; ok {
				t.Errorf("spend ÷ transport floor is judged")
			}
		}
	}
}

// TestPerSpend checks the sessions scenario's CPU per spend: each process's time over the
// spends, its share of the processes that could be read, and their sum.
func TestPerSpend(t *testing.T) {
	spent := []cpuSpent{
		{process: "router", gomaxprocs: "1", spent: 3 * time.Second},
		{process: "postgres", err: "permission denied"},
		{process: "load generator", gomaxprocs: "2", spent: time.Second},
	}
	each, all := perSpend(spent, 1000)
	if all != Millis(4*time.Millisecond) {
		t.Errorf("all: %s, want 4ms", all)
	}
	if each[0].PerSpend != Millis(3*time.Millisecond) || each[0].Share != 0.75 || each[0].GOMAXPROCS != "1" ||
		each[1].Err == "" || each[1].PerSpend != 0 || each[2].Share != 0.25 {
		t.Errorf("each: %+v", each)
	}
	if each, all := perSpend(spent, 0); all != 0 || each[0].PerSpend != 0 {
		t.Errorf("no spend succeeded: %+v, %s", each, all)
	}
	s := &SessionsReport{Succeeded: 1000, CPU: each, CPUPerSpend: all}
	var b strings.Builder
	writeSpendCPU(&b, s)
	for _, want := range []string{"CPU time per spend", "router", "3.00ms", "75.0 %", "unknown: permission denied", "all but postgres", "4.00ms"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the table has no %q:\n%s", want, b.String())
		}
	}
}
