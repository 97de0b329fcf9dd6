package loadtest

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"

	"hubu.dev/hubu/e2e/stack"
	"hubu.dev/hubu/proto/bflapi"
)

// target is the stack the latency and sessions scenarios go through: one the load test
// started (stack.Start), or one already running that `make up` described in its env file.
type target struct {
	routerMCPURL, routerToken string
	hubuURL, fluxURL          string
	// The addresses each service listens on (host:port), to find its process by.
	router, hubu, gongbu, flux string
	// floorDir receives the contract floor's SQLite file: beside the router's registry.
	floorDir string
}

// ownTarget is the stack the load test started.
func ownTarget(s *stack.Stack) *target {
	return &target{
		routerMCPURL: s.Router.URL() + "/mcp", routerToken: s.Credentials.RouterMCPToken,
		hubuURL: s.Hubu.URL(), fluxURL: s.Flux.URL(),
		router: s.Router.Addr, hubu: s.Hubu.Addr, gongbu: s.Gongbu.Addr, flux: s.Flux.Addr,
		floorDir: s.Config.Dir,
	}
}

// runningStack is a stack `make up` started, as its env file describes it.
type runningStack struct {
	file string
	env  map[string]string
	*target
	operatorToken, agentToken string
}

// loadRunningStack reads the env file and checks that it names what the load test needs. A
// stack without mockflux spends on BFL's API, with real money: it is refused.
func loadRunningStack(path string) (*runningStack, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--stack: %v (make up writes it once the stack is healthy)", err)
	}
	env, err := ParseEnvFile(string(b))
	if err != nil {
		return nil, fmt.Errorf("--stack %s: %v", path, err)
	}
	for _, k := range []string{"HUBU_URL", "GONGBU_URL", "ROUTER_MCP_URL", "ROUTER_MCP_TOKEN", "HUBU_APPROVER_TOKEN", "HUBU_AGENT_TOKEN"} {
		if env[k] == "" {
			return nil, fmt.Errorf("--stack %s: no %s in it: not an env file make up wrote", path, k)
		}
	}
	if _, present := env["MOCKFLUX_URL"]; !present {
		return nil, fmt.Errorf("--stack %s: no MOCKFLUX_URL in it: not an env file make up wrote", path)
	}
	if env["MOCKFLUX_URL"] == "" {
		return nil, fmt.Errorf("--stack %s: the stack spends on BFL's API (MOCKFLUX_URL is empty): a load test would spend real money; run it against a stack on mockflux (make up without BFL_API_KEY)", path)
	}
	rs := &runningStack{file: path, env: env, operatorToken: env["HUBU_APPROVER_TOKEN"], agentToken: env["HUBU_AGENT_TOKEN"],
		target: &target{routerMCPURL: env["ROUTER_MCP_URL"], routerToken: env["ROUTER_MCP_TOKEN"], hubuURL: env["HUBU_URL"], fluxURL: env["MOCKFLUX_URL"]}}
	for _, a := range []struct {
		key  string
		into *string
	}{{"ROUTER_MCP_URL", &rs.router}, {"HUBU_URL", &rs.hubu}, {"GONGBU_URL", &rs.gongbu}, {"MOCKFLUX_URL", &rs.flux}} {
		if *a.into, err = listenAddr(env[a.key]); err != nil {
			return nil, fmt.Errorf("--stack %s: %s: %v", path, a.key, err)
		}
	}
	// The router's registry is in the stack's state directory, where make up writes the file.
	rs.floorDir = filepath.Dir(path)
	return rs, nil
}

// listenAddr is the host:port a service at base URL u listens on, as /proc/net/tcp shows it
// (localhost is 127.0.0.1).
func listenAddr(u string) (string, error) {
	p, err := url.Parse(u)
	if err != nil {
		return "", err
	}
	host, port := p.Hostname(), p.Port()
	if host == "" {
		return "", fmt.Errorf("no host in %q", u)
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[p.Scheme]
	}
	return net.JoinHostPort(host, port), nil
}

// runAgainstStack runs the latency and sessions scenarios through the running stack of
// cfg.Stack, with its demo agent's budget raised for the run and its policy restored after it,
// whatever happened. restoreErr is a policy that could not be restored.
func runAgainstStack(ctx context.Context, cfg Config, rep *Report) (runErr, restoreErr error) {
	rs, err := loadRunningStack(cfg.Stack)
	if err != nil {
		return err, nil
	}
	rep.Stack = &StackReport{File: cfg.Stack, Settings: stackSettings(cfg, rs.target), Postgres: postgresNote(cfg, rs)}
	cfg.say("against the running stack of %s (router %s)", cfg.Stack, rs.routerMCPURL)
	a, err := rs.raiseDemoAgent(ctx)
	if err != nil {
		return err, nil
	}
	cfg.say("raised the budget of the demo agent %s (%s) for the run; its policy is restored at the end", a.name, a.id)
	defer func() {
		said, err := rs.restore(ctx, a)
		if err != nil {
			restoreErr = fmt.Errorf("could not restore the policy of the demo agent %s (%s): %v; set it again with hubuctl", a.name, a.id, err)
			rep.Stack.DemoAgent = restoreErr.Error()
			cfg.say("%v", restoreErr)
			return
		}
		rep.Stack.DemoAgent = said
		cfg.say("restored the policy of the demo agent %s", a.name)
	}()
	return runScenarios(ctx, cfg, rs.target, rep, true), nil
}

// postgresNote says whose Postgres the Postgres figures are of: the server of --database-url,
// and whether the stack's Hubu uses that one (its environment says, when it can be read).
func postgresNote(cfg Config, rs *runningStack) string {
	server := serverAddr(cfg.ServerURL)
	note := fmt.Sprintf("the contract floor's Postgres commits and the Postgres CPU are of the server of --database-url (%s)", cmp.Or(server, "a Unix socket"))
	pid, err := pidListening(rs.hubu)
	if err != nil {
		return note
	}
	dbURL, err := environValue(pid, "HUBU_DATABASE_URL")
	if err != nil || dbURL == "" {
		return note + "; whether the stack's Hubu uses it is not known"
	}
	if used := serverAddr(dbURL); used != server {
		return note + fmt.Sprintf(", not the stack's (its Hubu uses %s): they are not the stack's Postgres", cmp.Or(used, "a Unix socket"))
	}
	return note + ", which the stack's Hubu uses too"
}

// fluxClient is the generated client of the target's mockflux.
func (t *target) fluxClient() (*bflapi.ClientWithResponses, error) {
	return bflapi.NewClientWithResponses(t.fluxURL)
}
