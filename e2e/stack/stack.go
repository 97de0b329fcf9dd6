package stack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"hubu.dev/hubu/kit/proctest"
)

// Binaries is a directory holding every binary of the stack.
type Binaries string

// Path is one binary's path.
func (b Binaries) Path(name string) string { return filepath.Join(string(b), name) }

// Build compiles every binary once into dir; with failpoints, the crash points are compiled in.
func Build(ctx context.Context, repoRoot, dir string, failpoints bool) (Binaries, error) {
	args := []string{"-buildvcs=auto"} // --version names the commit, whatever GOFLAGS says
	if failpoints {
		args = append(args, "-tags", "failpoints")
	}
	args = append(args, "./services/hubu/cmd/...", "./services/gongbu/cmd/...", "./services/mockflux/cmd/...", "./router/cmd/...", "./e2e/cmd/hubu-demo")
	if err := proctest.Build(ctx, repoRoot, dir, args...); err != nil {
		return "", fmt.Errorf("build the binaries: %v", err)
	}
	return Binaries(dir), nil
}

// Config says where the stack keeps its state and which server and ports it uses.
type Config struct {
	// Dir holds the credentials, the logs, mockflux's journal and the router's registry.
	Dir string
	// ServerURL is a superuser URL of the Postgres server (scripts/ensure-postgres.sh prints one).
	ServerURL string
	// HubuDB and GongbuDB are the databases' names; they are created when missing.
	HubuDB, GongbuDB string
	// Addresses; empty means a free loopback port.
	HubuAddr, GongbuAddr, FluxAddr, RouterAddr string
	// RouterState is the routers' registry: a postgres:// URL a fleet of routers shares, reached
	// through Via(router, postgres); empty means the file router.db in Dir.
	RouterState string
	// FluxIdempotent makes mockflux honour Idempotency-Key (--honour-idempotency), and tells
	// Gongbu it does. Without it, both are as against the real BFL API, which documents no key.
	FluxIdempotent bool
	// BFLAPIKey, when set, runs the stack against BFL's API with this key instead of mockflux:
	// Gongbu is given the key and nothing else about the provider (its defaults are BFL's).
	BFLAPIKey string
	// Env adds environment entries per process name (hubu, gongbu, mockflux, router); an
	// entry overrides the stack's own setting of the same variable.
	Env map[string][]string
	// Wrap, per process name (hubu, gongbu), is a command line the process is started under,
	// its own binary and arguments following: unshare, say, for a test that gives Gongbu an
	// /etc/hosts of its own.
	Wrap map[string][]string
	// Progress receives one line per step; nil is silent.
	Progress io.Writer
	// Via, when set, gives the base URL through which process from reaches process to (a
	// fault proxy, say) instead of to's own address; from and to are hubu, gongbu,
	// mockflux and router, and to is postgres for a service's database URL.
	Via func(from, to, url string) string
}

// url is how process from reaches process to at addr.
func (c Config) url(from, to, addr string) string { return c.via(from, to, "http://"+addr) }

// via is how process from reaches to at u: through Via, when set.
func (c Config) via(from, to, u string) string {
	if c.Via != nil {
		return c.Via(from, to, u)
	}
	return u
}

// Credentials are made once per state directory and reused by every later start.
type Credentials struct {
	OperatorToken     string `json:"operator_token"`   // the approver's Hubu token
	GongbuAtHubuToken string `json:"gongbu_at_hubu"`   // Gongbu's service token at Hubu
	HubuAtGongbuToken string `json:"hubu_at_gongbu"`   // what Hubu presents to Gongbu
	RouterMCPToken    string `json:"router_mcp_token"` // what HTTP clients present to the router
	AgentToken        string `json:"agent_token"`      // the demo agent's token
	AgentID           string `json:"agent_id"`
	FluxKey           string `json:"flux_key"`
	WebhookKey        string `json:"webhook_key"` // derives the secrets mockflux signs its webhooks to Gongbu with
	// RouterToken is the router's own Hubu credential: with it the router checks people's OAuth
	// tokens and acts for their grants.
	RouterToken string `json:"router_token"`
}

// Stack is a running stack.
type Stack struct {
	Config      Config
	Bin         Binaries
	Credentials Credentials
	Flux        *Process
	Gongbu      *Process
	Hubu        *Process
	Router      *Process
	HubuDBURL   string
	GongbuDBURL string
	// FluxForGongbu is the URL Gongbu reaches mockflux at (through a proxy in some tests);
	// empty against BFL's API.
	FluxForGongbu string
}

// FluxPollingHosts are the hosts mockflux's polling URLs may name, for Gongbu and for
// `gongbu reconcile` (--flux-polling-hosts): its other name, as reached directly and by Gongbu.
func (s *Stack) FluxPollingHosts() string {
	return MockfluxOtherHost(s.Flux.URL()) + "," + MockfluxOtherHost(s.FluxForGongbu)
}

func (c Config) say(format string, args ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, format+"\n", args...)
	}
}

func randomToken(prefix string) string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Start brings the whole stack up and waits until every part is healthy.
func Start(ctx context.Context, bin Binaries, cfg Config) (*Stack, error) {
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	s := &Stack{Config: cfg, Bin: bin}
	var err error
	if s.HubuDBURL, err = EnsureDatabase(ctx, cfg.ServerURL, cfg.HubuDB); err != nil {
		return nil, err
	}
	if s.GongbuDBURL, err = EnsureDatabase(ctx, cfg.ServerURL, cfg.GongbuDB); err != nil {
		return nil, err
	}
	cfg.say("databases %s and %s ready", cfg.HubuDB, cfg.GongbuDB)
	if err := s.run(ctx, "hubu", nil, "migrate", "up", "--database-url", s.HubuDBURL); err != nil {
		return nil, err
	}
	if err := s.run(ctx, "gongbu", nil, "migrate", "up", "--database-url", s.GongbuDBURL); err != nil {
		return nil, err
	}
	if err := s.loadOrMakeCredentials(ctx); err != nil {
		return nil, err
	}
	// A port another process holds would have that process answer our health checks. An
	// address of our own choosing that another process took meanwhile (FreeAddr knows the
	// ports it handed out in this process only; tests in other packages run beside it) is
	// chosen again; one that was given is reported.
	for _, a := range []struct {
		name string
		addr *string
		env  string
	}{
		{"Hubu", &cfg.HubuAddr, "HUBU_STACK_HUBU_ADDR"}, {"Gongbu", &cfg.GongbuAddr, "HUBU_STACK_GONGBU_ADDR"},
		{"mockflux", &cfg.FluxAddr, "HUBU_STACK_MOCKFLUX_ADDR"}, {"the router", &cfg.RouterAddr, "HUBU_STACK_ROUTER_ADDR"},
	} {
		chosen := *a.addr == ""
		for try := 0; ; try++ {
			if chosen {
				if *a.addr, err = FreeAddr(); err != nil {
					return nil, err
				}
			}
			ln, err := net.Listen("tcp", *a.addr)
			if err == nil {
				ln.Close()
				break
			}
			if !chosen || try == 9 {
				return nil, fmt.Errorf("%s's address %s is taken (is another stack running? make down stops it), or set %s to a free one: %v", a.name, *a.addr, a.env, err)
			}
		}
	}
	s.Config = cfg
	logs := func(name string) string { return filepath.Join(cfg.Dir, name+".log") }
	base := []string{"PATH=" + os.Getenv("PATH")}
	env := func(name string, kv ...string) []string {
		return append(append(append([]string{}, base...), kv...), cfg.Env[name]...)
	}
	gongbuEnv := []string{"GONGBU_POLL_INTERVAL=200ms", "GONGBU_DATABASE_URL=" + cfg.via("gongbu", "postgres", s.GongbuDBURL),
		"GONGBU_HUBU_URL=" + cfg.url("gongbu", "hubu", cfg.HubuAddr),
		"GONGBU_HUBU_TOKEN=" + s.Credentials.GongbuAtHubuToken, "GONGBU_SERVICE_TOKEN=" + s.Credentials.HubuAtGongbuToken}
	if cfg.BFLAPIKey != "" {
		// BFL's API: the key is the whole configuration. No webhook: BFL cannot reach loopback.
		gongbuEnv = append(gongbuEnv, "GONGBU_FLUX_KEY="+cfg.BFLAPIKey)
	} else {
		fluxArgs := []string{"serve", "--listen", cfg.FluxAddr, "--data", filepath.Join(cfg.Dir, "mockflux.jsonl")}
		if cfg.FluxIdempotent {
			fluxArgs = append(fluxArgs, "--honour-idempotency")
		}
		s.Flux = &Process{Name: "mockflux", Path: bin.Path("mockflux"), Addr: cfg.FluxAddr, LogPath: logs("mockflux"), Args: fluxArgs, Env: env("mockflux")}
		fluxForGongbu := cfg.url("gongbu", "mockflux", cfg.FluxAddr)
		s.FluxForGongbu = fluxForGongbu
		gongbuEnv = append(gongbuEnv, "GONGBU_FLUX_URL="+fluxForGongbu, "GONGBU_FLUX_KEY="+s.Credentials.FluxKey,
			"GONGBU_FLUX_POLLING_HOSTS="+MockfluxOtherHost(fluxForGongbu), "GONGBU_FLUX_SAMPLE_HOSTS="+MockfluxOtherHost(fluxForGongbu),
			"GONGBU_WEBHOOK_URL="+cfg.url("mockflux", "gongbu", cfg.GongbuAddr)+"/v1/webhooks/bfl", "GONGBU_WEBHOOK_KEY="+s.Credentials.WebhookKey,
			fmt.Sprintf("GONGBU_FLUX_IDEMPOTENT=%v", cfg.FluxIdempotent))
	}
	s.Gongbu = &Process{Name: "gongbu", Path: bin.Path("gongbu"), Addr: cfg.GongbuAddr, LogPath: logs("gongbu"),
		Args: []string{"serve", "--listen", cfg.GongbuAddr}, Env: env("gongbu", gongbuEnv...)}
	s.Hubu = &Process{Name: "hubu", Path: bin.Path("hubu"), Addr: cfg.HubuAddr, LogPath: logs("hubu"),
		Args: []string{"serve", "--listen", cfg.HubuAddr},
		Env: env("hubu", "HUBU_DATABASE_URL="+cfg.via("hubu", "postgres", s.HubuDBURL), "HUBU_GONGBU_URL="+cfg.url("hubu", "gongbu", cfg.GongbuAddr),
			"HUBU_GONGBU_TOKEN="+s.Credentials.HubuAtGongbuToken,
			// Hubu is the router's OAuth authorization server, at the address people's clients reach.
			"HUBU_OAUTH_ISSUER="+s.OAuthIssuer(), "HUBU_OAUTH_RESOURCES="+s.OAuthResource())}
	for _, p := range []*Process{s.Gongbu, s.Hubu} {
		if w := cfg.Wrap[p.Name]; len(w) > 0 {
			p.Path, p.Args = w[0], append(append(w[1:len(w):len(w)], p.Path), p.Args...)
		}
	}
	services := []*Process{s.Gongbu, s.Hubu}
	if s.Flux != nil {
		services = append([]*Process{s.Flux}, services...)
	}
	for _, p := range services {
		if err := p.Start(); err != nil {
			s.Stop()
			return nil, err
		}
	}
	for _, p := range services {
		if err := p.WaitHealthy(ctx, 30*time.Second); err != nil {
			s.Stop()
			return nil, err
		}
	}
	if s.Flux != nil {
		cfg.say("mockflux, gongbu and hubu healthy")
	} else {
		cfg.say("gongbu (on BFL's API) and hubu healthy")
	}
	if err := s.ensureAgent(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	routerEnv := []string{"HUBU_AGENT_TOKEN=" + s.Credentials.AgentToken, "ROUTER_MCP_TOKEN=" + s.Credentials.RouterMCPToken}
	if s.Credentials.RouterToken != "" { // a release before OAuth mode has none
		routerEnv = append(routerEnv, "ROUTER_OAUTH_ISSUER="+s.OAuthIssuer(), "ROUTER_RESOURCE="+s.OAuthResource(),
			"HUBU_ROUTER_TOKEN="+s.Credentials.RouterToken)
	}
	s.Router = &Process{Name: "router", Path: bin.Path("hubu-unified-mcp"), Addr: cfg.RouterAddr, LogPath: logs("router"),
		Args: s.RouterArgs("--http", cfg.RouterAddr), Env: env("router", routerEnv...)}
	if err := s.Router.Start(); err != nil {
		s.Stop()
		return nil, err
	}
	if err := s.Router.WaitHealthy(ctx, 30*time.Second); err != nil {
		s.Stop()
		return nil, err
	}
	cfg.say("router healthy")
	return s, nil
}

// OAuthIssuer is Hubu's issuer URL: its own address, which people's clients and browsers reach.
func (s *Stack) OAuthIssuer() string { return "http://" + s.Config.HubuAddr }

// OAuthResource is the router's resource URL: its /mcp at its own address.
func (s *Stack) OAuthResource() string { return "http://" + s.Config.RouterAddr + "/mcp" }

// Replica is another process like p (a second Hubu or Gongbu on the same database and with the
// same configuration) that listens on addr and logs to its own file; it is not started.
func (s *Stack) Replica(p *Process, name, addr string) *Process {
	args := slices.Clone(p.Args)
	if i := slices.Index(args, "--listen"); i >= 0 {
		args[i+1] = addr
	}
	return &Process{Name: name, Path: p.Path, Args: args, Env: slices.Clone(p.Env), Addr: addr,
		LogPath: filepath.Join(s.Config.Dir, name+".log")}
}

// RouterArgs are the arguments of a router wired to this stack, sharing its registry.
// mockflux serves the images on loopback, which the router downloads only when allowed to.
func (s *Stack) RouterArgs(extra ...string) []string {
	state := filepath.Join(s.Config.Dir, "router.db")
	if s.Config.RouterState != "" {
		state = s.Config.via("router", "postgres", s.Config.RouterState)
	}
	return append([]string{"--hubu-url", s.Config.url("router", "hubu", s.Hubu.Addr), "--gongbu-url", s.Config.url("router", "gongbu", s.Gongbu.Addr),
		"--state", state, "--allow-private-image-hosts"}, extra...)
}

// Stop stops every process with SIGTERM, the router first.
func (s *Stack) Stop() {
	for _, p := range []*Process{s.Router, s.Hubu, s.Gongbu, s.Flux} {
		if p != nil {
			_ = p.Stop(15 * time.Second)
		}
	}
}
