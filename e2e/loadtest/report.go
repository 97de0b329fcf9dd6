package loadtest

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// Report is a run: what it measured, and each figure against its target.
type Report struct {
	Date      time.Time       `json:"date"`
	CPUs      int             `json:"cpus"`
	GoVersion string          `json:"go"`
	OS        string          `json:"os"`
	Config    reportConfig    `json:"config"`
	Latency   *LatencyReport  `json:"latency,omitempty"`
	Hubu      *HubuReport     `json:"hubu,omitempty"`
	Sessions  *SessionsReport `json:"sessions,omitempty"`
	Path      *PathReport     `json:"path,omitempty"`
	// Stack is the running stack the run went through (--stack), and how it differs from the
	// load test's own; nil when the load test started its own.
	Stack *StackReport `json:"stack,omitempty"`
	// Checks are every figure that has a target, in the order printed.
	Checks []Check `json:"checks"`
}

type reportConfig struct {
	Scenarios    []string `json:"scenarios"`
	Calls        int      `json:"n"`
	Sessions     int      `json:"sessions"`
	Spends       int      `json:"spends"`
	Clients      int      `json:"clients"`
	Agents       int      `json:"agents"`
	Duration     string   `json:"duration"`
	PgbenchScale int      `json:"pgbench_scale"`
	RenderTime   string   `json:"render_time"`
	IgnoresKeys  bool     `json:"provider_ignores_keys"`
	ServiceProcs int      `json:"service_gomaxprocs"` // 0: Go's default
}

// Check is a figure against its target. Only a correctness check (no errors, exact charges)
// fails the run; a missed performance target is information.
type Check struct {
	Scenario string `json:"scenario"`
	Figure   string `json:"figure"`
	Value    string `json:"value"`
	Target   string `json:"target"`
	// Status is met, not met, n/a (the figure could not be measured), or — (unjudged: a target
	// read against another run's figure, not within this one).
	Status      string `json:"status"`
	Correctness bool   `json:"correctness"`
}

const (
	met      = "met"
	notMet   = "not met"
	na       = "n/a"
	unjudged = "—"
)

// The targets of issue 29. The sessions scenario has targets of its own through a running
// stack (make up's settings, Config.Stack).
const (
	targetOverheadP50         = 8 * time.Millisecond
	targetOverheadP99         = 25 * time.Millisecond
	targetSpendOverContract   = 3.0
	targetRedeliveryFloor     = 1.25
	targetHubuOverPgbench     = 0.6
	targetHotOverPgbench1     = 0.5
	targetSessionsPerSec      = 120.0
	targetSessionsP99         = 2500 * time.Millisecond
	targetStackSessionsPerSec = 100.0
	targetStackSessionsP99    = 3 * time.Second
	targetCPUPerSpend         = "compare across runs (issue 29: −40 %)"
)

// targetMemory is each service's peak resident memory target, in bytes (1 MB = 10^6 bytes).
var targetMemory = map[string]int64{"router": 60e6, "hubu": 80e6, "gongbu": 80e6}

// Failed reports whether a correctness check failed: the run's exit status.
func (r *Report) Failed() bool {
	return slices.ContainsFunc(r.Checks, func(c Check) bool { return c.Correctness && c.Status != met })
}

// judge fills Checks from the figures.
func (r *Report) judge() {
	r.Checks = nil
	add := func(scenario, figure, value, target string, ok, known, correctness bool) {
		status := na
		if known {
			status = notMet
			if ok {
				status = met
			}
		}
		r.Checks = append(r.Checks, Check{scenario, figure, value, target, status, correctness})
	}
	if l := r.Latency; l != nil {
		known := l.Overhead.N > 0
		add(ScenarioLatency, "spend overhead p50", l.Overhead.P50.String(), "≤ "+targetOverheadP50.String(),
			time.Duration(l.Overhead.P50) <= targetOverheadP50, known, false)
		add(ScenarioLatency, "spend overhead p99", l.Overhead.P99.String(), "≤ "+targetOverheadP99.String(),
			time.Duration(l.Overhead.P99) <= targetOverheadP99, known, false)
		spendOverContract := Ratio{}
		if l.ContractFloor != nil {
			spendOverContract = l.ContractFloor.SpendOverFloor
		}
		add(ScenarioLatency, "new spend ÷ contract floor, p50", spendOverContract.String(), "≤ "+times(targetSpendOverContract),
			spendOverContract.Value <= targetSpendOverContract, spendOverContract.Valid, false)
		add(ScenarioLatency, "redelivery ÷ transport floor, p50", l.RedeliveryOverFloor.String(), "≤ "+times(targetRedeliveryFloor),
			l.RedeliveryOverFloor.Value <= targetRedeliveryFloor, l.RedeliveryOverFloor.Valid, false)
		add(ScenarioLatency, "errors", strconv.Itoa(l.Errors.Count), "0", l.Errors.Count == 0, true, true)
		add(ScenarioLatency, "charges at mockflux", strconv.Itoa(l.Charges), fmt.Sprintf("= %d (one per new spend%s)", l.Calls, ownCharges(l.OwnChargesOnly)),
			l.Charges == l.Calls, true, true)
	}
	if h := r.Hubu; h != nil {
		add(ScenarioHubu, fmt.Sprintf("%d agents ÷ pgbench -N -c %d", h.Agents, h.Clients), h.SpreadOverPgbench.String(), "≥ "+times(targetHubuOverPgbench),
			h.SpreadOverPgbench.Value >= targetHubuOverPgbench, h.SpreadOverPgbench.Valid, false)
		add(ScenarioHubu, "hot agent ÷ pgbench -N -c 1", h.HotOverPgbench1.String(), "≥ "+times(targetHotOverPgbench1),
			h.HotOverPgbench1.Value >= targetHotOverPgbench1, h.HotOverPgbench1.Valid, false)
		errs := h.Spread.Errors.Count + h.Hot.Errors.Count
		add(ScenarioHubu, "errors", strconv.Itoa(errs), "0", errs == 0, true, true)
	}
	if s := r.Sessions; s != nil {
		known := s.Latency.N > 0
		add(ScenarioSessions, "errors", strconv.Itoa(s.Errors.Count), "0", s.Errors.Count == 0, true, true)
		add(ScenarioSessions, "charges at mockflux", strconv.Itoa(s.ChargesMade), fmt.Sprintf("= %d (sessions × spends%s)", s.ChargesExpected, ownCharges(s.OwnChargesOnly)),
			s.ChargesMade == s.ChargesExpected, true, true)
		perSec, p99, through := targetSessionsPerSec, targetSessionsP99, ""
		if r.Stack != nil {
			perSec, p99, through = targetStackSessionsPerSec, targetStackSessionsP99, " (through a running stack)"
		}
		add(ScenarioSessions, "spends per second", strconv.FormatFloat(s.PerSecond, 'f', 1, 64), "≥ "+strconv.FormatFloat(perSec, 'f', 0, 64)+through,
			s.PerSecond >= perSec, known, false)
		add(ScenarioSessions, "spend latency p99", s.Latency.P99.String(), "≤ "+p99.String()+through,
			time.Duration(s.Latency.P99) <= p99, known, false)
		for _, m := range s.Memory {
			limit := targetMemory[m.Service]
			add(ScenarioSessions, m.Service+" peak RSS", megabytes(m.PeakBytes), "≤ "+megabytes(limit),
				m.PeakBytes <= limit, m.Err == "" && m.PeakBytes > 0, false)
		}
		// Its target is a change against an earlier run's figure: information to read across runs.
		cpu, status := na, na
		if s.CPUPerSpend > 0 {
			cpu, status = s.CPUPerSpend.String(), unjudged
			if unknown := s.cpuUnknown(); len(unknown) > 0 {
				cpu += " (" + allBut(unknown) + ")"
			}
		}
		r.Checks = append(r.Checks, Check{ScenarioSessions, "CPU per spend, all processes", cpu, targetCPUPerSpend, status, false})
	}
	if p := r.Path; p != nil {
		add(ScenarioPath, "errors", strconv.Itoa(p.Errors.Count), "0", p.Errors.Count == 0, true, true)
	}
}

// ownCharges says, beside a charges target, that only the run's own charges were counted.
func ownCharges(own bool) string {
	if own {
		return "; this run's jobs only"
	}
	return ""
}

func times(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) + "×" }

func megabytes(b int64) string { return strconv.FormatFloat(float64(b)/1e6, 'f', 1, 64) + " MB" }

// serviceProcs says, for the header, what GOMAXPROCS the stack's services ran with; "" when no
// scenario that started them ran.
func (c reportConfig) serviceProcs() string {
	if !slices.ContainsFunc(c.Scenarios, func(s string) bool { return s != ScenarioHubu }) {
		return ""
	}
	procs := "Go's default GOMAXPROCS"
	if c.ServiceProcs > 0 {
		procs = "GOMAXPROCS=" + strconv.Itoa(c.ServiceProcs)
	}
	return "; router, Hubu, Gongbu and mockflux at " + procs
}

// keys says how Gongbu treats the provider's idempotency keys, when not as under make up.
func (c reportConfig) keys() string {
	if c.IgnoresKeys {
		return ", Gongbu trusting no idempotency key (as against the real BFL API)"
	}
	return ""
}

// WriteText prints the report as tables.
func (r *Report) WriteText(w io.Writer) {
	if r.Stack != nil {
		fmt.Fprintf(w, "\nHubu load test, %s: %d CPUs, %s, %s\n", r.Date.Format("2006-01-02 15:04 UTC"), r.CPUs, r.GoVersion, r.OS)
		r.Stack.write(w)
	} else {
		fmt.Fprintf(w, "\nHubu load test, %s: %d CPUs, %s, %s; mockflux render time %s%s%s\n",
			r.Date.Format("2006-01-02 15:04 UTC"), r.CPUs, r.GoVersion, r.OS, r.Config.RenderTime, r.Config.keys(), r.Config.serviceProcs())
	}
	if l := r.Latency; l != nil {
		fmt.Fprintf(w, "\n1. latency: one MCP session through the router (streamable HTTP), %d rounds of a tools/list, a new spend and its redelivery, in %s\n\n", l.Calls, l.Elapsed)
		tw := newTable(w)
		fmt.Fprintln(tw, "\tcalls\tn\tp50\tp95\tp99\tmax")
		distRow(tw, "tools/list (the floor)", l.ToolsList)
		distRow(tw, "new spend", l.Spend)
		distRow(tw, "redelivery", l.Redelivery)
		if l.ProviderTime != nil {
			distRow(tw, "provider time", *l.ProviderTime)
		}
		distRow(tw, "spend overhead", l.Overhead)
		tw.Flush()
		if l.OverheadBasis == basisProvider {
			fmt.Fprintln(w, "\n  spend overhead = a spend's latency − its mockflux charge's ready_at − created_at")
		} else {
			fmt.Fprintf(w, "\n  spend overhead = a spend's latency − the configured render time (%s): mockflux's charges carry no ready_at\n", r.Config.RenderTime)
		}
		fmt.Fprintf(w, "  new spend ÷ transport floor, p50: %s (no target)\n", l.SpendOverFloor)
		switch {
		case l.ContractFloor != nil:
			writeContractFloor(w, l)
		case l.ContractFloorError != "":
			fmt.Fprintf(w, "\n  contract floor: not measured: %s\n", l.ContractFloorError)
		}
		if len(l.CPU) > 0 {
			writeCPU(w, l)
		}
		r.writeChecks(w, ScenarioLatency)
		l.Errors.write(w)
	}
	if h := r.Hubu; h != nil {
		fmt.Fprintf(w, "\n2. hubu: POST /v1/authorizations on Hubu directly (no executor), %d clients for %s each\n\n", h.Clients, h.Duration)
		tw := newTable(w)
		fmt.Fprintln(tw, "\tload\tauthorizations\terrors\tper second\tp50\tp95\tp99")
		for _, t := range []struct {
			name string
			t    *Throughput
		}{{fmt.Sprintf("%d agents", h.Agents), h.Spread}, {"one hot agent", h.Hot}} {
			fmt.Fprintf(tw, "\t%s\t%d\t%d\t%.1f\t%s\t%s\t%s\n", t.name, t.t.Succeeded, t.t.Errors.Count, t.t.PerSecond,
				t.t.Latency.P50, t.t.Latency.P95, t.t.Latency.P99)
		}
		if p := h.Pgbench; p != nil {
			for _, run := range []PgbenchRun{p.AtClients, p.AtOne} {
				fmt.Fprintf(tw, "\tpgbench -N -c %d -j %d (scale %d)\t\t\t%.1f tps\tavg %s\t\t\n", run.Clients, run.Threads, p.Scale, run.TPS, run.LatencyAverage)
			}
		}
		tw.Flush()
		if h.PgbenchSkipped != "" {
			fmt.Fprintf(w, "\n  %s\n", h.PgbenchSkipped)
		}
		r.writeChecks(w, ScenarioHubu)
		h.Spread.Errors.write(w)
		h.Hot.Errors.write(w)
	}
	if s := r.Sessions; s != nil {
		fmt.Fprintf(w, "\n3. sessions: %d MCP sessions at once × %d new spends each, through the router\n\n", s.Sessions, s.Spends)
		tw := newTable(w)
		fmt.Fprintln(tw, "\tspends\terrors\tin\tper second\tp50\tp95\tp99\tmax")
		fmt.Fprintf(tw, "\t%d\t%d\t%s\t%.1f\t%s\t%s\t%s\t%s\n", s.Succeeded, s.Errors.Count, s.Elapsed, s.PerSecond,
			s.Latency.P50, s.Latency.P95, s.Latency.P99, s.Latency.Max)
		tw.Flush()
		fmt.Fprintln(w)
		tw = newTable(w)
		fmt.Fprintln(tw, "\tservice\tpid\tpeak RSS (VmHWM)\tRSS at the end (VmRSS)\tof it, the binary's own pages (at the end)\tpeak since")
		for _, m := range s.Memory {
			if m.Err != "" {
				fmt.Fprintf(tw, "\t%s\t\tunknown: %s\t\t\t\n", m.Service, m.Err)
				continue
			}
			fmt.Fprintf(tw, "\t%s\t%d\t%s\t%s\t%s\t%s\n", m.Service, m.Pid, megabytes(m.PeakBytes), megabytes(m.CurrentBytes), megabytes(m.BinaryBytes), m.PeakSince)
		}
		tw.Flush()
		if len(s.CPU) > 0 {
			writeSpendCPU(w, s)
		}
		r.writeChecks(w, ScenarioSessions)
		s.Errors.write(w)
	}
	if p := r.Path; p != nil {
		fmt.Fprintf(w, "\n4. path: where a new spend's time goes, from the spans of %d traced spends (%d traces complete); tracing costs time of its own, so compare the latency scenario's figures with the targets\n\n", p.Spends, p.Traced)
		tw := newTable(w)
		fmt.Fprintln(tw, "\tstep (service, span)\tkind\tin\tstarts, p50\ttakes, p50")
		for _, st := range p.Steps {
			name := st.Service + " " + st.Name
			if st.Occurrence > 1 {
				name += fmt.Sprintf(" (#%d)", st.Occurrence)
			}
			fmt.Fprintf(tw, "\t%s\t%s\t%d\t%s\t%s\n", name, st.Kind, st.In, st.StartP50, st.TookP50)
		}
		tw.Flush()
		r.writeChecks(w, ScenarioPath)
		p.Errors.write(w)
	}
	if r.Failed() {
		fmt.Fprintln(w, "\nFAILED: a spend went wrong (see the correctness checks marked *).")
	}
}

func (r *Report) writeChecks(w io.Writer, scenario string) {
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "\tfigure\tvalue\ttarget\t")
	for _, c := range r.Checks {
		if c.Scenario != scenario {
			continue
		}
		mark := ""
		if c.Correctness {
			mark = " *"
		}
		fmt.Fprintf(tw, "\t%s%s\t%s\t%s\t%s\n", c.Figure, mark, c.Value, c.Target, c.Status)
	}
	tw.Flush()
}

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

func distRow(tw io.Writer, name string, d Dist) {
	if d.N == 0 {
		fmt.Fprintf(tw, "\t%s\t0\t\t\t\t\n", name)
		return
	}
	fmt.Fprintf(tw, "\t%s\t%d\t%s\t%s\t%s\t%s\n", name, d.N, d.P50, d.P95, d.P99, d.Max)
}

// WriteJSON writes the report, with every sample, to path.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// errorLog counts a scenario's errors and keeps the first few distinct messages: thousands
// of copies of one message say no more than one.
type errorLog struct {
	mu     sync.Mutex
	Count  int      `json:"count"`
	Sample []string `json:"sample"`
}

const errorSample = 10

func (e *errorLog) add(msg string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.Count++
	if len(e.Sample) < errorSample && !slices.Contains(e.Sample, msg) {
		e.Sample = append(e.Sample, msg)
	}
}

func (e *errorLog) write(w io.Writer) {
	if e.Count == 0 {
		return
	}
	fmt.Fprintf(w, "\n  %d errors; the first distinct ones:\n", e.Count)
	for _, m := range e.Sample {
		fmt.Fprintf(w, "    %s\n", strings.ReplaceAll(m, "\n", " "))
	}
}

// runID tells this run's call ids and prompts from any other's.
func runID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b)
}

// writeContractFloor prints the parts of the contract floor and what they add up to, beside
// the new spend's p50.
func writeContractFloor(w io.Writer, l *LatencyReport) {
	f := l.ContractFloor
	fmt.Fprintln(w, "\n  contract floor: what a new spend cannot do without under the contracts, one after another, each timed in this run (p50):")
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "\tpart\teach\ttimes\tin all")
	part := func(what string, each Millis, times int) {
		fmt.Fprintf(tw, "\t%s\t%s\t%d\t%s\n", what, each, times, Millis(times)*each)
	}
	part("tools/list (the transport floor)", l.ToolsList.P50, 1)
	part("HTTP round trip to a service (GET /healthz on Hubu)", f.HTTP.P50, floorExchanges)
	part("durable Postgres commit (a one-row INSERT)", f.PostgresCommit.P50, floorPostgresCommits)
	part("durable SQLite commit (WAL, synchronous=FULL)", f.SQLiteCommit.P50, floorSQLiteCommits)
	fmt.Fprintf(tw, "\tcontract floor\t\t\t%s\n", f.Floor)
	tw.Flush()
	fmt.Fprintf(w, "\n  new spend ÷ contract floor, p50: %s; contract floor ÷ transport floor: %s\n", f.SpendOverFloor, f.FloorOverTransport)
}

// writeCPU prints the latency scenario's CPU time per round, by process, beside a round's
// wall time: more CPU than wall time means the round's work does not fit in one core.
func writeCPU(w io.Writer, l *LatencyReport) {
	fmt.Fprintln(w, "\n  CPU time per round (a tools/list, a new spend, its redelivery), from /proc/<pid>/stat:")
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "\tprocess\tGOMAXPROCS\tCPU per round")
	var all Millis
	var unknown []string
	for _, c := range l.CPU {
		if c.Err != "" {
			fmt.Fprintf(tw, "\t%s\t\tunknown: %s\n", c.Process, c.Err)
			unknown = append(unknown, c.Process)
			continue
		}
		all += c.PerRound
		fmt.Fprintf(tw, "\t%s\t%s\t%s\n", c.Process, cmp.Or(c.GOMAXPROCS, "—"), c.PerRound)
	}
	fmt.Fprintf(tw, "\t%s\t\t%s, in a round of %s on average\n", allBut(unknown), all, l.RoundTime)
	tw.Flush()
}

// writeSpendCPU prints the sessions scenario's CPU time per spend, by process, with each
// one's share of them all.
func writeSpendCPU(w io.Writer, s *SessionsReport) {
	fmt.Fprintf(w, "\n  CPU time per spend: over the scenario (from when every session starts to the last answer), ÷ the %d succeeded spends, from /proc/<pid>/stat:\n\n", s.Succeeded)
	tw := newTable(w)
	fmt.Fprintln(tw, "\tprocess\tGOMAXPROCS\tCPU per spend\tshare")
	for _, c := range s.CPU {
		if c.Err != "" {
			fmt.Fprintf(tw, "\t%s\t\tunknown: %s\t\n", c.Process, c.Err)
			continue
		}
		fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s\n", c.Process, cmp.Or(c.GOMAXPROCS, "—"), c.PerSpend, percent(c.Share))
	}
	fmt.Fprintf(tw, "\t%s\t\t%s\t\n", allBut(s.cpuUnknown()), s.CPUPerSpend)
	tw.Flush()
}

// allBut names the processes a CPU total covers: all of them, or all but those unknown.
func allBut(unknown []string) string {
	if len(unknown) == 0 {
		return "all of them"
	}
	return "all but " + strings.Join(unknown, ", ")
}

func percent(share float64) string { return strconv.FormatFloat(share*100, 'f', 1, 64) + " %" }
