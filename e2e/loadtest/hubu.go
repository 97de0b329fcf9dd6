package loadtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/e2e/stack"
	"hubu.dev/hubu/kit/proctest"
	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/proto/hubuapi"
)

// HubuReport is scenario 2: new authorizations against Hubu's API directly, with no executor
// wired (decisions stay dispatching), then pgbench on the same Postgres server as the
// reference: what the server does with simple write transactions at the same concurrency.
type HubuReport struct {
	Clients  int    `json:"clients"`
	Agents   int    `json:"agents"`
	Duration string `json:"duration"`
	// Spread is the load spread over Agents agents; Hot is all of it on one agent, whose
	// budget every authorization holds against.
	Spread *Throughput `json:"spread"`
	Hot    *Throughput `json:"hot_agent"`
	// Pgbench is nil when pgbench is missing; PgbenchSkipped then says so.
	Pgbench        *PgbenchReport `json:"pgbench,omitempty"`
	PgbenchSkipped string         `json:"pgbench_skipped,omitempty"`
	// SpreadOverPgbench is Spread ÷ pgbench -N at Clients clients; HotOverPgbench1 is Hot ÷
	// pgbench -N at one client (one agent's authorizations are serialized on its budget, as
	// one pgbench client's transactions are by the client).
	SpreadOverPgbench Ratio `json:"spread_over_pgbench_at_clients"`
	HotOverPgbench1   Ratio `json:"hot_agent_over_pgbench_at_1"`
}

// Throughput is a closed-loop load: Clients clients each send the next request as soon as
// the last was answered, for the scenario's duration.
type Throughput struct {
	Agents    int      `json:"agents"`
	Clients   int      `json:"clients"`
	Succeeded int      `json:"succeeded"`
	Errors    errorLog `json:"errors"`
	Elapsed   Millis   `json:"elapsed_ms"`
	PerSecond float64  `json:"per_second"`
	Latency   Dist     `json:"latency"`
}

func runHubu(ctx context.Context, cfg Config, dir string) (*HubuReport, error) {
	rep := &HubuReport{Clients: cfg.Clients, Agents: cfg.Agents, Duration: cfg.Duration.String()}
	db := "hubu_" + cfg.Name + "_auth"
	dbURL, err := createDatabase(ctx, cfg.ServerURL, db)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := stack.DropDatabases(context.WithoutCancel(ctx), cfg.ServerURL, db); err != nil {
			cfg.say("could not drop %s: %v", db, err)
		}
	}()
	hubuBin := cfg.Bin.Path("hubu")
	if _, err := runBinary(ctx, hubuBin, "migrate", "up", "--database-url", dbURL); err != nil {
		return nil, err
	}
	operator, err := runBinary(ctx, hubuBin, "operator", "create", "--name", "loadtest", "--database-url", dbURL)
	if err != nil {
		return nil, err
	}
	addr, err := stack.FreeAddr()
	if err != nil {
		return nil, err
	}
	// No HUBU_GONGBU_URL: decisions stay dispatching, so the figures are Hubu's and its
	// database's alone.
	p := &proctest.Process{Name: "hubu-auth", Path: hubuBin, Addr: addr, LogPath: filepath.Join(dir, "hubu-auth.log"),
		Args: []string{"serve", "--listen", addr}, Env: []string{"PATH=" + os.Getenv("PATH"), "HUBU_DATABASE_URL=" + dbURL}}
	if err := p.Start(); err != nil {
		return nil, err
	}
	defer p.Stop(15 * time.Second)
	if err := p.WaitHealthy(ctx, 30*time.Second); err != nil {
		return nil, err
	}

	// Agents+1 agents: the spread load's, and a fresh one for the hot load.
	tokens, err := createAgents(ctx, p.URL(), operator, cfg.Agents+1)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: pooledTransport(cfg.Clients), Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	cl, err := hubuapi.NewClientWithResponses(p.URL(), hubuapi.WithHTTPClient(hc))
	if err != nil {
		return nil, err
	}
	// The reference runs right after the load it is compared with, so that both see the same
	// machine: on a shared box, minutes apart can halve either figure. Hubu stays up, idle,
	// while pgbench runs.
	var bench *pgbenchDB
	if path, err := exec.LookPath(cfg.Pgbench); err != nil {
		rep.PgbenchSkipped = fmt.Sprintf("pgbench (%s) is not installed: the ratios to pgbench are skipped", cfg.Pgbench)
		cfg.say("%s", rep.PgbenchSkipped)
	} else {
		var drop func()
		if bench, drop, err = preparePgbench(ctx, cfg, path); err != nil {
			return nil, err
		}
		defer drop()
		rep.Pgbench = &PgbenchReport{Scale: cfg.PgbenchScale}
	}
	cfg.say("hubu: %d clients, %d agents, %s ...", cfg.Clients, cfg.Agents, cfg.Duration)
	if rep.Spread, err = authorizeFor(ctx, cl, tokens[:cfg.Agents], cfg.Clients, cfg.Duration); err != nil {
		return nil, err
	}
	if bench != nil {
		if rep.Pgbench.AtClients, err = bench.run(ctx, cfg.Clients); err != nil {
			return nil, err
		}
	}
	cfg.say("hubu: %d clients, one hot agent, %s ...", cfg.Clients, cfg.Duration)
	if rep.Hot, err = authorizeFor(ctx, cl, tokens[cfg.Agents:], cfg.Clients, cfg.Duration); err != nil {
		return nil, err
	}
	if bench != nil {
		if rep.Pgbench.AtOne, err = bench.run(ctx, 1); err != nil {
			return nil, err
		}
		rep.SpreadOverPgbench = ratio(rep.Spread.PerSecond, rep.Pgbench.AtClients.TPS)
		rep.HotOverPgbench1 = ratio(rep.Hot.PerSecond, rep.Pgbench.AtOne.TPS)
	}
	return rep, nil
}

// pooledTransport keeps a connection per client alive between requests, so that the load
// measures the server, not TCP handshakes.
func pooledTransport(clients int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = clients+8, clients+8
	return t
}

// withBearer sets the request's bearer credential.
func withBearer(token string) hubuapi.RequestEditorFn {
	return func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
}

func operatorClient(hubuURL, token string) (*hubuapi.ClientWithResponses, error) {
	return hubuapi.NewClientWithResponses(hubuURL, hubuapi.WithRequestEditorFn(withBearer(token)))
}

func parseUUID(s string) (uuid.UUID, error) { return uuid.Parse(s) }

// createAgents creates n agents that auto-approve everything the run asks for and returns
// their tokens.
func createAgents(ctx context.Context, hubuURL, operatorToken string, n int) ([]string, error) {
	op, err := operatorClient(hubuURL, operatorToken)
	if err != nil {
		return nil, err
	}
	pol := generousPolicy()
	tokens := make([]string, n)
	for i := range n {
		resp, err := op.CreateAgentWithResponse(ctx, hubuapi.AgentCreate{Name: fmt.Sprintf("loadtest-%03d", i), Policy: &pol})
		if err != nil {
			return nil, fmt.Errorf("create an agent: %v", err)
		}
		if resp.JSON201 == nil {
			return nil, fmt.Errorf("create an agent: HTTP %d: %s", resp.StatusCode(), resp.Body)
		}
		tokens[i] = resp.JSON201.Token
	}
	return tokens, nil
}

// authorizeFor runs clients closed-loop clients for d, each request a new operation (a new
// private key and public handle) of the next agent in turn.
func authorizeFor(ctx context.Context, cl *hubuapi.ClientWithResponses, tokens []string, clients int, d time.Duration) (*Throughput, error) {
	args := contract.ImageRequest{Prompt: "load test: an origami fox", Model: "flux-dev", Width: 512, Height: 512}
	hash, err := requestHash(args)
	if err != nil {
		return nil, err
	}
	editors := make([]hubuapi.RequestEditorFn, len(tokens))
	for i, t := range tokens {
		editors[i] = withBearer(t)
	}
	out := &Throughput{Agents: len(tokens), Clients: clients}
	var (
		next    atomic.Uint64
		mu      sync.Mutex
		latency []time.Duration
		wg      sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for range clients {
		wg.Go(func() {
			var mine []time.Duration
			for time.Now().Before(deadline) && ctx.Err() == nil {
				req := hubuapi.AuthorizeRequest{
					OperationKey: contract.NewOperationKey("codex"), PublicHandle: contract.NewPublicHandle(),
					Tool: hubuapi.GenerateImage, RequestHash: hash, Arguments: args,
				}
				agent := int(next.Add(1) % uint64(len(editors)))
				began := time.Now()
				resp, err := cl.AuthorizeWithResponse(ctx, req, editors[agent])
				took := time.Since(began)
				switch {
				case err != nil:
					out.Errors.add("POST /v1/authorizations: " + err.Error())
				case resp.JSON201 == nil:
					out.Errors.add(fmt.Sprintf("POST /v1/authorizations: HTTP %d: %s", resp.StatusCode(), strings.TrimSpace(string(resp.Body))))
				case resp.JSON201.State != hubuapi.OperationStateDispatching:
					out.Errors.add("POST /v1/authorizations: a new operation in state " + string(resp.JSON201.State) + ", not dispatching")
				default:
					mine = append(mine, took)
				}
			}
			mu.Lock()
			latency = append(latency, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	out.Elapsed = Millis(time.Since(start))
	out.Succeeded = len(latency)
	out.PerSecond = float64(out.Succeeded) / time.Duration(out.Elapsed).Seconds()
	out.Latency = NewDist(latency)
	return out, nil
}

// requestHash is the router's request hash of generate_image's arguments: SHA-256 of the
// tool name, a zero byte and the arguments' canonical JSON. These arguments hold only short
// ASCII strings and small integers, for which canonical JSON (RFC 8785) is encoding/json's
// output of a map: keys sorted, no spaces.
func requestHash(args contract.ImageRequest) (string, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return "", err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", err
	}
	canonical, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(append([]byte("generate_image\x00"), canonical...))
	return hex.EncodeToString(h[:]), nil
}

// runBinary runs one of the stack's binaries to completion and returns its standard output.
func runBinary(ctx context.Context, path string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", filepath.Base(path), strings.Join(args[:min(2, len(args))], " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
