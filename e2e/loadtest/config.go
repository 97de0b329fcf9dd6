package loadtest

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"hubu.dev/hubu/e2e/stack"
	"hubu.dev/hubu/kit/command"
)

// The scenarios, by the names --scenarios takes.
const (
	ScenarioLatency  = "latency"  // 1: one MCP session, sequential: floor, spend, redelivery
	ScenarioHubu     = "hubu"     // 2: Hubu's API directly, against pgbench on the same server
	ScenarioSessions = "sessions" // 3: many concurrent MCP sessions spending at once
	ScenarioPath     = "path"     // 4: where a spend's time goes, step by step, from its spans (only when named)
)

var allScenarios = []string{ScenarioLatency, ScenarioHubu, ScenarioSessions, ScenarioPath}

// defaultScenarios run when none are named: path runs a second, traced stack, and is asked for.
var defaultScenarios = []string{ScenarioLatency, ScenarioHubu, ScenarioSessions}

// stackScenarios are those that run through a running stack (--stack), and its default: hubu
// and path start processes of their own.
var stackScenarios = []string{ScenarioLatency, ScenarioSessions}

// ownStackFlags set up the stack the load test starts; --stack refuses them.
var ownStackFlags = []string{"render-time", "provider-ignores-keys", "service-procs"}

// flagEnv is the variable a flag falls back to: HUBU_LOADTEST_ and its name in capitals.
func flagEnv(flag string) string {
	return "HUBU_LOADTEST_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Config is one run. ParseArgs fills it from flags and HUBU_LOADTEST_* variables; the
// defaults are the sizes.
type Config struct {
	// ServerURL is a superuser URL of the Postgres server (scripts/ensure-postgres.sh prints one).
	ServerURL string
	// Scenarios to run, among allScenarios; they are reported in that order.
	Scenarios []string
	// Calls is scenario 1's N: N rounds of a tools/list, a new spend and its redelivery (default 200).
	Calls int
	// Sessions and Spends are scenario 3's size: Sessions concurrent MCP sessions each make
	// Spends new spends one after another (defaults 200 and 10).
	Sessions, Spends int
	// PathSpends is scenario 4's number of traced spends (default 50).
	PathSpends int
	// Clients, Agents and Duration are scenario 2's: Clients concurrent HTTP clients make new
	// authorizations for Duration, spread over Agents agents, then for one hot agent; pgbench
	// runs as long (defaults 8, 16, 10s; Duration is whole seconds, as pgbench -T takes).
	Clients, Agents int
	Duration        time.Duration
	// Pgbench is the pgbench binary ("" or missing: the ratios to pgbench are skipped) and
	// PgbenchScale its -s for -i (default 10).
	Pgbench      string
	PgbenchScale int
	// RenderTime is mockflux's --render-time: how long a job takes before it is Ready (default 0).
	RenderTime time.Duration
	// ProviderIgnoresKeys runs Gongbu as against the real BFL API, which documents no
	// Idempotency-Key: every submit on a connection of its own (default false: mockflux honours
	// keys, as under make up).
	ProviderIgnoresKeys bool
	// ServiceProcs is the GOMAXPROCS of each Go service of the stacks the spends go through
	// (router, Hubu, Gongbu, mockflux); 0 leaves Go's default: every core, or the CPU limit of
	// its container rounded up to at least 2 (default DefaultServiceProcs).
	ServiceProcs int
	// Name names the run's databases: hubu_NAME, gongbu_NAME, hubu_NAME_auth, hubu_NAME_floor
	// and pgbench_NAME, dropped before and after the run (default loadtest).
	Name string
	// JSONPath, when set, receives the whole report with every sample.
	JSONPath string
	// Stack, when set, is the env file of a stack `make up` runs (.hubu/stack.env): the latency
	// and sessions scenarios go through it instead of a stack of the load test's own, whose
	// settings (RenderTime, ProviderIgnoresKeys, ServiceProcs) then do not apply; the report
	// says how the running stack's differ. The hubu and path scenarios start processes of
	// their own and do not run with it.
	Stack string

	// Bin holds the binaries; empty builds them from RepoRoot into a temporary directory.
	Bin stack.Binaries
	// RepoRoot is the repository's root; empty is found from the working directory (go.work).
	RepoRoot string
	// Progress receives a line per step; nil is silent.
	Progress io.Writer
}

var validName = regexp.MustCompile(`^[a-z0-9_]{1,40}$`)

const usage = `hubu-loadtest measures the spend path: through the router over streamable HTTP (a stack of
its own, from the real binaries) and Hubu's API directly. Every figure is a distribution, or a
ratio against a reference measured in the same run. It is a benchmark: it fails only when a
spend went wrong (an error, or charges that do not match the spends), never on a timing.

With --stack FILE (the env file make up writes, .hubu/stack.env) the latency and sessions
scenarios go through that running stack instead, and the report says how its settings differ
from the load test's own stack.

usage: hubu-loadtest [flags]

`

// ParseArgs reads a Config from the command line, each flag falling back to its variable.
func ParseArgs(args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	fs := command.NewFlagSet("hubu-loadtest", getenv, stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	server := fs.String("database-url", "HUBU_LOADTEST_DATABASE_URL", "", "superuser URL of the Postgres server (make loadtest passes the one scripts/ensure-postgres.sh finds)")
	scenarios := fs.String("scenarios", "HUBU_LOADTEST_SCENARIOS", "", "scenarios to run, comma-separated: "+strings.Join(allScenarios, ", ")+
		" (default "+strings.Join(defaultScenarios, ",")+"; with --stack "+strings.Join(stackScenarios, ",")+")")
	calls := fs.Int("n", "HUBU_LOADTEST_N", 200, "latency: rounds of a tools/list, a new spend and its redelivery")
	sessions := fs.Int("sessions", "HUBU_LOADTEST_SESSIONS", 200, "sessions: concurrent MCP sessions")
	spends := fs.Int("spends", "HUBU_LOADTEST_SPENDS", 10, "sessions: new spends per session")
	pathSpends := fs.Int("path-spends", "HUBU_LOADTEST_PATH_SPENDS", 50, "path: traced spends, one after another")
	clients := fs.Int("clients", "HUBU_LOADTEST_CLIENTS", 8, "hubu: concurrent HTTP clients (and pgbench -c)")
	agents := fs.Int("agents", "HUBU_LOADTEST_AGENTS", 16, "hubu: agents the authorizations are spread over")
	duration := fs.Duration("duration", "HUBU_LOADTEST_DURATION", 10*time.Second, "hubu: how long each load (and pgbench -T) runs, whole seconds")
	pgbench := fs.String("pgbench", "HUBU_LOADTEST_PGBENCH", "pgbench", "pgbench binary, for the reference figures")
	scale := fs.Int("pgbench-scale", "HUBU_LOADTEST_PGBENCH_SCALE", 10, "pgbench -i -s")
	render := fs.Duration("render-time", "HUBU_LOADTEST_RENDER_TIME", 0, "mockflux's render time: how long after a submit a job is Ready")
	ignoresKeys := fs.Bool("provider-ignores-keys", "HUBU_LOADTEST_PROVIDER_IGNORES_KEYS", false,
		"run Gongbu as against the real BFL API, which documents no Idempotency-Key (every submit on a connection of its own); default: mockflux honours keys, as under make up")
	serviceProcs := fs.Int("service-procs", "HUBU_LOADTEST_SERVICE_PROCS", DefaultServiceProcs(),
		"GOMAXPROCS of each Go service the spends go through (router, Hubu, Gongbu, mockflux); 0 leaves Go's default")
	name := fs.String("name", "HUBU_LOADTEST_NAME", "loadtest", "names the run's databases: hubu_NAME, gongbu_NAME, hubu_NAME_auth, hubu_NAME_floor, pgbench_NAME")
	jsonPath := fs.String("json", "HUBU_LOADTEST_JSON", "", "also write every figure and sample to this file as JSON")
	stackFile := fs.String("stack", "HUBU_LOADTEST_STACK", "",
		"the env file of a running stack (make up writes .hubu/stack.env): run the latency and sessions scenarios through it instead of a stack of the load test's own")
	if err := fs.ParseNoArgs(args); err != nil {
		return Config{}, err
	}
	if *stackFile != "" {
		// The settings of the load test's own stack: a running stack has its own, which the
		// report compares with the defaults of these.
		onLine := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { onLine[f.Name] = true })
		var given []string
		for _, f := range ownStackFlags {
			if env := flagEnv(f); onLine[f] || getenv(env) != "" {
				given = append(given, fmt.Sprintf("--%s (%s)", f, env))
			}
		}
		if len(given) > 0 {
			return Config{}, fmt.Errorf("%s set up the load test's own stack; with --stack the running stack keeps its own settings, and the report says how they differ", strings.Join(given, ", "))
		}
	}
	c := Config{
		ServerURL: *server, Calls: *calls, Sessions: *sessions, Spends: *spends, PathSpends: *pathSpends, Clients: *clients, Agents: *agents,
		Duration: *duration, Pgbench: *pgbench, PgbenchScale: *scale, RenderTime: *render, ProviderIgnoresKeys: *ignoresKeys, ServiceProcs: *serviceProcs, Name: *name, JSONPath: *jsonPath, Stack: *stackFile,
	}
	names := *scenarios
	if strings.TrimSpace(names) == "" {
		names = strings.Join(defaultScenarios, ",")
		if c.Stack != "" {
			names = strings.Join(stackScenarios, ",")
		}
	}
	for s := range strings.SplitSeq(names, ",") {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(c.Scenarios, s) {
			c.Scenarios = append(c.Scenarios, s)
		}
	}
	return c, c.Validate()
}

// Validate checks a Config once, before anything starts; a bad value is an error, never a
// silent default.
func (c Config) Validate() error {
	if c.ServerURL == "" {
		return fmt.Errorf("--database-url (or HUBU_LOADTEST_DATABASE_URL) is required; make loadtest finds or starts a Postgres")
	}
	if len(c.Scenarios) == 0 {
		return fmt.Errorf("--scenarios: name at least one of %s", strings.Join(allScenarios, ", "))
	}
	for _, s := range c.Scenarios {
		if !slices.Contains(allScenarios, s) {
			return fmt.Errorf("--scenarios: unknown scenario %q (known: %s)", s, strings.Join(allScenarios, ", "))
		}
		if c.Stack != "" && !slices.Contains(stackScenarios, s) {
			return fmt.Errorf("--scenarios: %s starts processes of its own and does not run with --stack; name %s, or run it without --stack", s, strings.Join(stackScenarios, " or "))
		}
	}
	positive := []struct {
		flag  string
		value int
	}{{"n", c.Calls}, {"sessions", c.Sessions}, {"spends", c.Spends}, {"clients", c.Clients}, {"agents", c.Agents}, {"pgbench-scale", c.PgbenchScale}}
	if c.runs(ScenarioPath) && c.PathSpends < 1 {
		return fmt.Errorf("--path-spends must be at least 1, not %d", c.PathSpends)
	}
	for _, p := range positive {
		if p.value < 1 {
			return fmt.Errorf("--%s must be at least 1, not %d", p.flag, p.value)
		}
	}
	if c.Duration < time.Second || c.Duration%time.Second != 0 {
		return fmt.Errorf("--duration must be a whole number of seconds, at least 1s (pgbench -T runs as long), not %s", c.Duration)
	}
	if c.ServiceProcs < 0 {
		return fmt.Errorf("--service-procs must not be negative, not %d", c.ServiceProcs)
	}
	if c.RenderTime < 0 {
		return fmt.Errorf("--render-time must not be negative, not %s", c.RenderTime)
	}
	if !validName.MatchString(c.Name) {
		return fmt.Errorf("--name %q: use 1 to 40 lower-case letters, digits and underscores", c.Name)
	}
	return nil
}

func (c Config) runs(scenario string) bool { return slices.Contains(c.Scenarios, scenario) }

func (c Config) say(format string, args ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, "loadtest: "+format+"\n", args...)
	}
}

// goServices are the processes of a stack that are Go programs with their own scheduler: the
// ones ServiceProcs applies to.
var goServices = stack.GoServices

// DefaultServiceProcs is stack.SharedProcs, the GOMAXPROCS make up gives each service too.
func DefaultServiceProcs() int { return stack.SharedProcs() }

// stackEnv is the environment of a stack's processes, by name: extra, and each Go service's
// GOMAXPROCS.
func (c Config) stackEnv(extra map[string][]string) map[string][]string {
	env := make(map[string][]string, len(goServices))
	for name, kv := range extra {
		env[name] = append(env[name], kv...)
	}
	if c.ServiceProcs > 0 {
		for _, name := range goServices {
			env[name] = append(env[name], "GOMAXPROCS="+strconv.Itoa(c.ServiceProcs))
		}
	}
	return env
}
