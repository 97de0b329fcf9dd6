// Package loadtest is `make loadtest`: it measures the spend path through the router over
// streamable HTTP, against a stack of its own started from the real binaries (or a running
// one, Config.Stack), and Hubu's API directly. The machines it runs on are small and noisy, so every figure is a distribution,
// or a ratio against a reference measured in the same run (the transport's floor, pgbench on
// the same Postgres server). It is a benchmark, not a test: the targets it prints beside the
// figures are informational, and a run fails only when a spend went wrong — an error, or
// charges at the provider that are not exactly one per new spend.
package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"hubu.dev/hubu/e2e/stack"
	"hubu.dev/hubu/proto/hubuapi"
)

// Run runs the configured scenarios and prints the report to out (and to cfg.JSONPath). The
// error is a run that could not be made (a stack that did not start, say); a run whose
// spends went wrong returns its report, whose correctness checks say what (Report.Failed).
func Run(ctx context.Context, cfg Config, out io.Writer) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rep := newReport(cfg)
	dir, err := os.MkdirTemp("", "hubu-loadtest-")
	if err != nil {
		return nil, err
	}
	keep := false // the logs, when something went wrong
	defer func() {
		if keep {
			fmt.Fprintf(out, "\nThe services' logs are kept in %s.\n", dir)
		} else {
			os.RemoveAll(dir)
		}
	}()
	if cfg.Stack != "" {
		// Only the scenarios that go through the router run: nothing to build, no stack to start.
		runErr, restoreErr := runAgainstStack(ctx, cfg, rep)
		if runErr != nil {
			return nil, errors.Join(runErr, restoreErr)
		}
		return rep, errors.Join(finish(cfg, rep, out), restoreErr)
	}
	if cfg.Bin == "" {
		binDir, err := os.MkdirTemp("", "hubu-loadtest-bin-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(binDir)
		if cfg.Bin, err = buildBinaries(ctx, cfg, binDir); err != nil {
			return nil, err
		}
	}
	// Hubu's own scenario first, with no stack running beside it: its figures are about Hubu
	// and Postgres alone.
	if cfg.runs(ScenarioHubu) {
		if rep.Hubu, err = runHubu(ctx, cfg, dir); err != nil {
			keep = true
			return nil, fmt.Errorf("scenario hubu: %w", err)
		}
	}
	if cfg.runs(ScenarioLatency) || cfg.runs(ScenarioSessions) {
		if err := runThroughRouter(ctx, cfg, dir, rep); err != nil {
			keep = true
			return nil, err
		}
	}
	// Last, on a stack of its own: its spans cost time that must not weigh on the others.
	if cfg.runs(ScenarioPath) {
		if rep.Path, err = runPath(ctx, cfg, dir); err != nil {
			keep = true
			return nil, fmt.Errorf("scenario path: %w", err)
		}
	}
	rep.judge()
	keep = rep.Failed()
	return rep, finish(cfg, rep, out)
}

// finish judges the figures and writes the report.
func finish(cfg Config, rep *Report, out io.Writer) error {
	rep.judge()
	rep.WriteText(out)
	if cfg.JSONPath != "" {
		return rep.WriteJSON(cfg.JSONPath)
	}
	return nil
}

// buildBinaries builds the stack's binaries into dir, from the repository's root.
func buildBinaries(ctx context.Context, cfg Config, dir string) (stack.Binaries, error) {
	root := cfg.RepoRoot
	if root == "" {
		var err error
		if root, err = repoRoot(); err != nil {
			return "", err
		}
	}
	cfg.say("building the binaries ...")
	return stack.Build(ctx, root, dir, false)
}

// repoRoot is the nearest directory at or above the working directory that holds go.work.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work at or above the working directory: run it from the repository (make loadtest does)")
		}
		dir = parent
	}
}

// runThroughRouter starts the stack and runs the scenarios that go through the router.
func runThroughRouter(ctx context.Context, cfg Config, dir string, rep *Report) error {
	hubuDB, gongbuDB := "hubu_"+cfg.Name, "gongbu_"+cfg.Name
	// Databases left by an interrupted run would hold a demo agent this run's fresh
	// credentials cannot use.
	if err := stack.DropDatabases(ctx, cfg.ServerURL, hubuDB, gongbuDB); err != nil {
		return fmt.Errorf("drop the databases of an earlier run: %v", err)
	}
	defer func() {
		if err := stack.DropDatabases(context.WithoutCancel(ctx), cfg.ServerURL, hubuDB, gongbuDB); err != nil {
			cfg.say("could not drop %s and %s: %v", hubuDB, gongbuDB, err)
		}
	}()
	cfg.say("starting the stack (mockflux render time %s) ...", cfg.RenderTime)
	s, err := stack.Start(ctx, cfg.Bin, stack.Config{
		Dir: filepath.Join(dir, "stack"), ServerURL: cfg.ServerURL, HubuDB: hubuDB, GongbuDB: gongbuDB, FluxIdempotent: !cfg.ProviderIgnoresKeys,
		Env: cfg.stackEnv(map[string][]string{"mockflux": {"MOCKFLUX_PENDING_POLLS=" + benchmarkPendingPolls, "MOCKFLUX_RENDER_TIME=" + cfg.RenderTime.String()}}),
	})
	if err != nil {
		return fmt.Errorf("start the stack: %w", err)
	}
	defer s.Stop()
	if err := unlimitDemoAgent(ctx, s); err != nil {
		return err
	}
	return runScenarios(ctx, cfg, ownTarget(s), rep, false)
}

// runScenarios runs the latency and sessions scenarios, those of cfg, through the router of
// t. On a running stack (shared) other traffic may reach mockflux meanwhile: the charges
// counted are then only those of the run's own spends.
func runScenarios(ctx context.Context, cfg Config, t *target, rep *Report, shared bool) error {
	flux, err := t.fluxClient()
	if err != nil {
		return err
	}
	conns := 1
	if cfg.runs(ScenarioSessions) {
		conns = cfg.Sessions
	}
	rc := newRouterClient(t.routerMCPURL, t.routerToken, conns)
	defer rc.close()
	run := runID()
	if cfg.runs(ScenarioLatency) {
		if rep.Latency, err = runLatency(ctx, cfg, t, rc, flux, run, shared); err != nil {
			return fmt.Errorf("scenario latency: %w", err)
		}
	}
	if cfg.runs(ScenarioSessions) {
		if rep.Sessions, err = runSessions(ctx, cfg, t, rc, flux, run, shared); err != nil {
			return fmt.Errorf("scenario sessions: %w", err)
		}
	}
	return nil
}

// unlimitDemoAgent raises the stack's demo agent's budget ($5.00 a day) far above what the
// run spends (thousands of $0.003 images), so that no spend of the run is refused for budget.
func unlimitDemoAgent(ctx context.Context, s *stack.Stack) error {
	op, err := operatorClient(s.Hubu.URL(), s.Credentials.OperatorToken)
	if err != nil {
		return err
	}
	agentID, err := parseUUID(s.Credentials.AgentID)
	if err != nil {
		return fmt.Errorf("the demo agent's id: %v", err)
	}
	resp, err := op.SetAgentPolicyWithResponse(ctx, agentID, generousPolicy())
	if err != nil {
		return fmt.Errorf("raise the demo agent's budget: %v", err)
	}
	if resp.JSON200 == nil {
		return fmt.Errorf("raise the demo agent's budget: HTTP %d: %s", resp.StatusCode(), resp.Body)
	}
	return nil
}

// generousPolicy approves every spend the run makes at once, within a budget the run never
// reaches.
func generousPolicy() hubuapi.Policy {
	return hubuapi.Policy{
		Currency: "USD", AutoApproveLimitMicros: 1_000_000, PerOperationCeilingMicros: 1_000_000,
		BudgetMicros: 1_000_000_000_000_000, BudgetPeriod: hubuapi.PolicyBudgetPeriodDay,
		AllowedModels: []string{"*"}, AllowedProviders: []string{"*"},
	}
}

// createDatabase makes an empty database name on the server (dropping any earlier one) and
// returns its URL.
func createDatabase(ctx context.Context, serverURL, name string) (string, error) {
	if err := stack.DropDatabases(ctx, serverURL, name); err != nil {
		return "", err
	}
	return stack.EnsureDatabase(ctx, serverURL, name)
}

func newReport(cfg Config) *Report {
	return &Report{
		Date: time.Now().UTC(), CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH,
		Config: reportConfig{
			Scenarios: cfg.Scenarios, Calls: cfg.Calls, Sessions: cfg.Sessions, Spends: cfg.Spends, Clients: cfg.Clients,
			Agents: cfg.Agents, Duration: cfg.Duration.String(), PgbenchScale: cfg.PgbenchScale, RenderTime: cfg.RenderTime.String(),
			IgnoresKeys: cfg.ProviderIgnoresKeys, ServiceProcs: cfg.ServiceProcs,
		},
	}
}
