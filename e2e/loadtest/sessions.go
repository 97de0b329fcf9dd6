package loadtest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"hubu.dev/hubu/proto/bflapi"
)

// SessionsReport is scenario 3: many MCP sessions at once, each making new spends one after
// another, with every service's memory under that load and the CPU time a spend costs.
type SessionsReport struct {
	Sessions  int      `json:"sessions"`
	Spends    int      `json:"spends_per_session"`
	Succeeded int      `json:"succeeded"`
	Errors    errorLog `json:"errors"`
	// ChargesExpected is one per spend; ChargesMade is how many mockflux made during the scenario.
	ChargesExpected int `json:"charges_expected"`
	ChargesMade     int `json:"charges_made"`
	// OwnChargesOnly says ChargesMade counts only the charges of the run's own jobs (against a
	// running stack, which other clients may use meanwhile), not every charge made meanwhile.
	OwnChargesOnly bool `json:"own_charges_only,omitempty"`
	// Elapsed runs from the moment every session starts spending to the last answer.
	Elapsed   Millis  `json:"elapsed_ms"`
	PerSecond float64 `json:"spends_per_second"`
	// Latency is every succeeded spend's.
	Latency Dist `json:"latency"`
	// Memory is per service (router, hubu, gongbu), read when the last spend was answered.
	Memory []ServiceMemory `json:"memory"`
	// CPU is the processor time of each process the latency scenario measures (the stack's
	// four, the Postgres server with its backends, the load generator) over the scenario
	// (Elapsed's window), per succeeded spend, and its share; CPUPerSpend is their sum, over
	// the processes that could be read (0 when none could, or no spend succeeded).
	CPU         []SpendCPU `json:"cpu_per_spend"`
	CPUPerSpend Millis     `json:"cpu_per_spend_all_ms"`
}

// cpuUnknown names the processes whose CPU time could not be read.
func (s *SessionsReport) cpuUnknown() []string {
	var unknown []string
	for _, c := range s.CPU {
		if c.Err != "" {
			unknown = append(unknown, c.Process)
		}
	}
	return unknown
}

// ServiceMemory is one service's resident memory under the load.
type ServiceMemory struct {
	Service string `json:"service"`
	Pid     int    `json:"pid"`
	Memory
	// PeakSince says what the peak covers: "scenario" when the kernel's peak was reset as the
	// scenario started, "process start" when it could not be.
	PeakSince string `json:"peak_since"`
	Err       string `json:"error,omitempty"`
}

// connectAtOnce bounds how many sessions are opened at the same time: opening them is not
// what the scenario measures.
const connectAtOnce = 16

func runSessions(ctx context.Context, cfg Config, t *target, rc *routerClient, flux *bflapi.ClientWithResponses, run string, shared bool) (*SessionsReport, error) {
	rep := &SessionsReport{Sessions: cfg.Sessions, Spends: cfg.Spends, ChargesExpected: cfg.Sessions * cfg.Spends, OwnChargesOnly: shared}
	cfg.say("sessions: opening %d MCP sessions ...", cfg.Sessions)
	sessions, err := connectAll(ctx, rc, cfg.Sessions)
	defer func() {
		for _, cs := range sessions {
			if cs != nil {
				cs.Close()
			}
		}
	}()
	if err != nil {
		return nil, err
	}
	services := []struct{ name, addr string }{{"router", t.router}, {"hubu", t.hubu}, {"gongbu", t.gongbu}}
	pids := make([]int, len(services))
	rep.Memory = make([]ServiceMemory, len(services))
	for i, svc := range services {
		rep.Memory[i] = ServiceMemory{Service: svc.name, PeakSince: "process start"}
		if pids[i], err = pidListening(svc.addr); err != nil {
			rep.Memory[i].Err = err.Error()
			continue
		}
		rep.Memory[i].Pid = pids[i]
		if resetPeak(pids[i]) == nil {
			rep.Memory[i].PeakSince = "scenario"
		}
	}
	before, err := chargeCount(ctx, flux)
	if err != nil {
		return nil, err
	}

	cfg.say("sessions: %d sessions × %d new spends ...", cfg.Sessions, cfg.Spends)
	var (
		mu      sync.Mutex
		latency = make([]time.Duration, 0, rep.ChargesExpected)
		jobs    = make(map[string]bool, rep.ChargesExpected) // the jobs the answers named
		wg      sync.WaitGroup
		start   = make(chan struct{})
	)
	for si, cs := range sessions {
		wg.Go(func() {
			<-start
			for i := range cfg.Spends {
				callID := fmt.Sprintf("call_loadtest_%s_sessions_%04d_%04d", run, si, i)
				out, took, err := spend(ctx, cs, callID, spendArgs(fmt.Sprintf("load test %s: session %d, spend %d", run, si, i)))
				problem := "transport: " + fmt.Sprint(err)
				var job string
				if err == nil {
					problem = out.problem(false)
				}
				if problem == "" {
					if job, err = jobID(out.Result.ImageURL); err != nil {
						problem = err.Error()
					}
				}
				mu.Lock()
				if problem == "" {
					latency = append(latency, took)
					jobs[job] = true
				} else {
					rep.Errors.add(problem)
				}
				mu.Unlock()
				if ctx.Err() != nil {
					return
				}
			}
		})
	}
	cpu := newCPUWatch(stackProcesses(cfg, t))
	began := time.Now()
	close(start)
	wg.Wait()
	rep.Elapsed = Millis(time.Since(began))
	spent := cpu.stop()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	// Memory before the sessions close: what the services hold while serving this many.
	for i := range services {
		if pids[i] == 0 {
			continue
		}
		m, err := readMemory(pids[i])
		if err != nil {
			rep.Memory[i].Err = err.Error()
			continue
		}
		rep.Memory[i].Memory = m
	}
	if shared {
		charges, err := listCharges(ctx, flux)
		if err != nil {
			return nil, err
		}
		rep.ChargesMade = runCharges(charges, jobs)
	} else {
		after, err := chargeCount(ctx, flux)
		if err != nil {
			return nil, err
		}
		rep.ChargesMade = after - before
	}
	rep.Succeeded = len(latency)
	rep.CPU, rep.CPUPerSpend = perSpend(spent, rep.Succeeded)
	rep.Latency = NewDist(latency)
	rep.PerSecond = float64(rep.Succeeded) / time.Duration(rep.Elapsed).Seconds()
	return rep, nil
}

// connectAll opens n sessions, connectAtOnce at a time; on an error it returns the sessions
// it opened, for the caller to close.
func connectAll(ctx context.Context, rc *routerClient, n int) ([]*mcp.ClientSession, error) {
	sessions := make([]*mcp.ClientSession, n)
	errs := make([]error, n)
	sem := make(chan struct{}, connectAtOnce)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			sessions[i], errs[i] = rc.connect(ctx, fmt.Sprintf("hubu-loadtest-session-%d", i))
		})
	}
	wg.Wait()
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
		}
	}
	if failed > 0 {
		first := errs[slices.IndexFunc(errs, func(err error) bool { return err != nil })]
		return sessions, fmt.Errorf("%d of %d MCP sessions could not be opened; the first: %w", failed, n, first)
	}
	return sessions, nil
}
