package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"hubu.dev/hubu/proto/bflapi"
)

// LatencyReport is scenario 1: one MCP session, sequential, N rounds of a tools/list, a new
// spend and its redelivery. tools/list is the floor (the router's transport with no backend
// behind it); a new spend goes through Hubu, Gongbu and the provider; a redelivery is
// answered from the router's registry.
type LatencyReport struct {
	Calls      int  `json:"calls"`
	ToolsList  Dist `json:"tools_list"`
	Spend      Dist `json:"spend"`
	Redelivery Dist `json:"redelivery"`
	// Overhead is each new spend's latency less the provider's own time for it (OverheadBasis
	// says which time that was).
	Overhead      Dist   `json:"spend_overhead"`
	OverheadBasis string `json:"spend_overhead_basis"`
	// ProviderTime is each new spend's ready_at − created_at at mockflux, when known.
	ProviderTime        *Dist `json:"provider_time,omitempty"`
	SpendOverFloor      Ratio `json:"spend_over_floor_p50"`
	RedeliveryOverFloor Ratio `json:"redelivery_over_floor_p50"`
	// ContractFloor is the least a new spend can take under the contracts, from its parts timed
	// after the rounds; ContractFloorError says why it is missing, when it is.
	ContractFloor      *ContractFloor `json:"contract_floor,omitempty"`
	ContractFloorError string         `json:"contract_floor_error,omitempty"`
	// Charges is how many charges mockflux made during the scenario: one per new spend, none
	// per redelivery.
	Charges int `json:"charges"`
	// OwnChargesOnly says Charges counts only the charges of the run's own jobs (against a
	// running stack, which other clients may use meanwhile), not every charge made meanwhile.
	OwnChargesOnly bool     `json:"own_charges_only,omitempty"`
	Errors         errorLog `json:"errors"`
	// CPU is the processor time of each process of the stack per round (a tools/list, a new
	// spend and its redelivery): where the machine's work goes, which on a small machine is
	// what a spend waits on once nothing waits on a timer.
	CPU []ProcessCPU `json:"cpu_per_round"`
	// RoundTime is the wall time of a round, on average, over the window the CPU was measured in.
	RoundTime Millis    `json:"round_ms"`
	Elapsed   Millis    `json:"elapsed_ms"`
	started   time.Time // for Elapsed
}

const (
	basisProvider   = "provider"    // ready_at − created_at of the spend's charge
	basisRenderTime = "render_time" // the configured --render-time: the charges carry no ready_at
)

// latencySpend is a new spend that succeeded, to deliver again and to match with its charge.
type latencySpend struct {
	callID string
	args   json.RawMessage
	handle string
	job    string
	took   time.Duration
}

func runLatency(ctx context.Context, cfg Config, t *target, rc *routerClient, flux *bflapi.ClientWithResponses, run string, shared bool) (*LatencyReport, error) {
	n := cfg.Calls
	cfg.say("latency: one session, %d rounds of a tools/list, a new spend and its redelivery ...", n)
	rep := &LatencyReport{Calls: n, OwnChargesOnly: shared, started: time.Now()}
	cs, err := rc.connect(ctx, "hubu-loadtest-latency")
	if err != nil {
		return nil, fmt.Errorf("connect to the router: %w", err)
	}
	defer cs.Close()
	before, err := chargeCount(ctx, flux)
	if err != nil {
		return nil, err
	}

	// N rounds of a tools/list, a new spend and that spend delivered again, rather than N of
	// each in turn: the three are then sampled across the same minutes of a noisy machine, and
	// a slow minute weighs on a ratio's two terms alike instead of on one. A redelivery right
	// after its first delivery is the usual one too (a client retrying a lost answer).
	floor := make([]time.Duration, 0, n)
	spends := make([]latencySpend, 0, n)
	redelivered := make([]time.Duration, 0, n)
	jobs := map[string]bool{} // every job an answer named, new spends' and redeliveries'
	cpu := newCPUWatch(stackProcesses(cfg, t))
	for i := range n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if took, err := listTools(ctx, cs); err != nil {
			rep.Errors.add("tools/list: " + err.Error())
		} else {
			floor = append(floor, took)
		}
		sp, problem := rep.newSpend(ctx, cs, run, i)
		if problem != "" {
			rep.Errors.add("new spend: " + problem)
			continue
		}
		spends = append(spends, sp)
		jobs[sp.job] = true
		out, took, err := spend(ctx, cs, sp.callID, sp.args)
		problem = fmt.Sprint(err)
		if err == nil {
			problem = out.problem(true)
		}
		if problem == "" {
			if job, err := jobID(out.Result.ImageURL); err == nil {
				jobs[job] = true // a redelivery that made a job of its own is a charge too many
			}
		}
		if problem == "" && out.PublicHandle != sp.handle {
			problem = "answered for another operation than the first delivery"
		}
		if problem != "" {
			rep.Errors.add("redelivery: " + problem)
			continue
		}
		redelivered = append(redelivered, took)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep.CPU = perRound(cpu.stop(), n)
	rep.RoundTime = Millis(cpu.done.Sub(cpu.started) / time.Duration(n))
	rep.Elapsed = Millis(time.Since(rep.started))

	charges, err := listCharges(ctx, flux)
	if err != nil {
		return nil, err
	}
	if shared {
		rep.Charges = runCharges(charges, jobs)
	} else {
		rep.Charges = standing(charges) - before
	}
	rep.overheads(cfg, spends, charges)

	rep.ToolsList, rep.Redelivery = NewDist(floor), NewDist(redelivered)
	took := make([]time.Duration, len(spends))
	for i, sp := range spends {
		took[i] = sp.took
	}
	rep.Spend = NewDist(took)
	rep.SpendOverFloor = ratio(float64(rep.Spend.P50), float64(rep.ToolsList.P50))
	rep.RedeliveryOverFloor = ratio(float64(rep.Redelivery.P50), float64(rep.ToolsList.P50))
	cfg.say("latency: timing the parts of the contract floor, %d of each ...", n)
	if rep.ContractFloor, err = measureContractFloor(ctx, cfg, t, rep, n); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		rep.ContractFloorError = err.Error()
	}
	return rep, nil
}

// serverAddr is the host:port of the Postgres server a URL names, for finding its process
// ("" when the URL has none, as for a Unix socket: the process is then not found).
func serverAddr(serverURL string) string {
	u, err := url.Parse(serverURL)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	host, port := u.Hostname(), u.Port()
	if host == "localhost" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "5432"
	}
	return net.JoinHostPort(host, port)
}

// newSpend makes the i-th new spend; problem says what went wrong with it, if anything.
func (rep *LatencyReport) newSpend(ctx context.Context, cs *mcp.ClientSession, run string, i int) (sp latencySpend, problem string) {
	sp = latencySpend{
		callID: fmt.Sprintf("call_loadtest_%s_latency_%06d", run, i),
		args:   spendArgs(fmt.Sprintf("load test %s: latency, spend %d", run, i)),
	}
	out, took, err := spend(ctx, cs, sp.callID, sp.args)
	if err != nil {
		return sp, err.Error()
	}
	if p := out.problem(false); p != "" {
		return sp, p
	}
	if sp.job, err = jobID(out.Result.ImageURL); err != nil {
		return sp, err.Error()
	}
	sp.handle, sp.took = out.PublicHandle, took
	return sp, ""
}

// overheads computes each spend's latency above the provider's own time: ready_at −
// created_at of its charge, found by the job id in its image URL. When any of those charges
// has no ready_at (a mockflux from before --render-time), every spend falls back to the
// configured render time, so that all the overheads rest on one basis.
func (rep *LatencyReport) overheads(cfg Config, spends []latencySpend, charges []charge) {
	byJob := make(map[string]charge, len(charges))
	for _, c := range charges {
		byJob[c.JobID] = c
	}
	provider := make([]time.Duration, 0, len(spends))
	matched := spends[:0:0]
	for _, sp := range spends {
		c, ok := byJob[sp.job]
		if !ok {
			rep.Errors.add("new spend: mockflux has no charge for its job")
			continue
		}
		matched = append(matched, sp)
		if pt, ok := c.providerTime(); ok {
			provider = append(provider, pt)
		}
	}
	over := make([]time.Duration, len(matched))
	if len(provider) == len(matched) {
		rep.OverheadBasis = basisProvider
		for i, sp := range matched {
			over[i] = sp.took - provider[i]
		}
		d := NewDist(provider)
		rep.ProviderTime = &d
	} else {
		rep.OverheadBasis = basisRenderTime
		for i, sp := range matched {
			over[i] = sp.took - cfg.RenderTime
		}
	}
	rep.Overhead = NewDist(over)
}
