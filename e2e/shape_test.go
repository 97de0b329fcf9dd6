package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	harness "hubu.dev/hubu/e2e/stack"
	"hubu.dev/hubu/kit/proctest"
)

// The shape a team runs in production, on one machine: two routers sharing one registry in
// Postgres, two Hubu and two Gongbu on their databases, each pair behind a load balancer,
// one Postgres. Calls are spread across the routers; in the middle of them one router, one
// Hubu and one Gongbu are killed (SIGKILL, no drain). The clients then redeliver every call
// through the router that is left, as a harness does after a reconnect. Every call must be
// charged exactly once, every delivery of a call must name the same operation, and the
// three records of money must agree.
func TestWholeShapeSurvivesLosingAReplicaOfEach(t *testing.T) {
	t.Parallel()
	server, id, dir, idConfig := stackPlace(t)
	addr := func() string { return must(harness.FreeAddr())(t) }
	hubuAddrs, gongbuAddrs := []string{addr(), addr()}, []string{addr(), addr()}
	hubuLB, gongbuLB := startBalancer(t, hubuAddrs), startBalancer(t, gongbuAddrs)
	su := startSuite(t, harness.Config{
		Dir: dir, ServerURL: server, HubuDB: "hubu_shape_" + id, GongbuDB: "gongbu_shape_" + id, FluxIdempotent: true,
		HubuAddr: hubuAddrs[0], GongbuAddr: gongbuAddrs[0],
		Env: map[string][]string{
			"router": {"ROUTER_IDENTITY_CONFIG=" + idConfig},
			"gongbu": {"GONGBU_LEASE=1s"},
			"hubu":   {"HUBU_RETRY_AFTER=1s"},
		},
		// Every service reaches Hubu and Gongbu through their balancers, as it would in a
		// deployment: no process knows a replica by its own address.
		Via: func(from, to, u string) string {
			switch to {
			case "hubu":
				return hubuLB
			case "gongbu":
				return gongbuLB
			}
			return u
		},
	})
	s := su.s
	hubu2 := s.Replica(s.Hubu, "hubu-2", hubuAddrs[1])
	gongbu2 := s.Replica(s.Gongbu, "gongbu-2", gongbuAddrs[1])
	for _, p := range []*harness.Process{hubu2, gongbu2} {
		proctest.Start(t, p)
	}

	// The fleet's registry is a database of its own on the same server.
	registryDB := "router_shape_" + id
	registryURL := must(harness.EnsureDatabase(context.Background(), server, registryDB))(t)
	t.Cleanup(func() { _ = harness.DropDatabases(context.Background(), server, registryDB) })
	routers := []*harness.Process{su.fleetRouter("router-a", registryURL), su.fleetRouter("router-b", registryURL)}
	for _, r := range routers {
		proctest.Start(t, r)
	}
	sessions := []*mcp.ClientSession{su.sessionWith(routers[0]), su.sessionWith(routers[1])}

	const calls = 24
	id0 := func(i int) string { return fmt.Sprintf("call_shape%sQx7Lm2Rb%03d", id, i) }
	handles := make([]sync.Map, calls) // every handle any delivery of call i was answered with

	// The first half of the calls, spread across the routers, each delivered to both at once
	// for a third of them: the two routers must coalesce them into one operation.
	deliver := func(cs *mcp.ClientSession, i int) {
		r, err := su.call(cs, "generate_image", foxArgs, codexMeta(id0(i)))
		if err == nil && r.handle() != "" {
			handles[i].Store(r.handle(), true)
		}
	}
	var wg sync.WaitGroup
	for i := range calls / 2 {
		wg.Go(func() { deliver(sessions[i%2], i) })
		if i%3 == 0 {
			wg.Go(func() { deliver(sessions[(i+1)%2], i) })
		}
	}
	wg.Wait()

	// The second half in flight while one replica of each service dies under them.
	for i := calls / 2; i < calls; i++ {
		wg.Go(func() { deliver(sessions[i%2], i) })
	}
	// Once one of them has reached the provider, the others are on their way through the services.
	noError(t, poll(30*time.Second, 5*time.Millisecond, func() error {
		if n := su.charges().Count; n <= calls/2 {
			return fmt.Errorf("%d provider charges: none of the second half has reached the provider", n)
		}
		return nil
	}))
	for _, p := range []*harness.Process{routers[1], hubu2, gongbu2} {
		noError(t, p.Kill())
	}
	wg.Wait()

	// Every call again through the router that is left, in a new session (the harness
	// reconnected), until it answers as succeeded. A call the killed processes left in flight
	// goes on under the operation it already has.
	cs := su.sessionWith(routers[0])
	for i := range calls {
		var last result
		err := poll(60*time.Second, 100*time.Millisecond, func() error {
			r, err := su.call(cs, "generate_image", foxArgs, codexMeta(id0(i)))
			if err != nil {
				return err
			}
			last = r
			if r.handle() != "" {
				handles[i].Store(r.handle(), true)
			}
			if r["status"] != "succeeded" {
				return fmt.Errorf("call %d: %v", i, r)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("call %d never succeeded through the router left: %v (last answer %v)", i, err, last)
		}
	}
	seen := map[string]int{}
	for i := range calls {
		var hs []string
		handles[i].Range(func(h, _ any) bool { hs = append(hs, h.(string)); return true })
		if len(hs) != 1 {
			t.Fatalf("the deliveries of call %d were answered with %d operations: %v", i, len(hs), hs)
		}
		if j, dup := seen[hs[0]]; dup {
			t.Fatalf("calls %d and %d share the operation %s", j, i, hs[0])
		}
		seen[hs[0]] = i
	}
	// The shared registry holds references to the images Gongbu keeps, never their bytes.
	conn := must(pgx.Connect(context.Background(), registryURL))(t)
	defer conn.Close(context.Background())
	var final, byReference, withBytes, largest int
	noError(t, conn.QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE result LIKE '%"kept_image"%'),
		count(*) FILTER (WHERE result LIKE '%"image":"%'), coalesce(max(octet_length(result)), 0) FROM calls WHERE result IS NOT NULL`).
		Scan(&final, &byReference, &withBytes, &largest))
	if final != calls || byReference != calls || withBytes != 0 || largest > 1<<10 {
		t.Fatalf("the registry recorded %d final answers, %d by reference, %d with image bytes, the largest %d bytes",
			final, byReference, withBytes, largest)
	}
	su.settleAndReconcile(calls)
}

// fleetRouter is an HTTP router of the fleet: the stack's router's settings, its own address
// and log, and the shared registry in Postgres instead of the stack's file.
func (su *suite) fleetRouter(name, registryURL string) *harness.Process {
	su.t.Helper()
	addr := must(harness.FreeAddr())(su.t)
	args := su.s.RouterArgs("--http", addr)
	i := slices.Index(args, "--state")
	if i < 0 {
		su.t.Fatalf("the stack's router arguments name no --state: %v", args)
	}
	args[i+1] = registryURL
	return &harness.Process{Name: name, Path: su.s.Router.Path, Args: args, Env: slices.Clone(su.s.Router.Env), Addr: addr,
		LogPath: filepath.Join(su.s.Config.Dir, name+".log")}
}

// sessionWith opens a streamable HTTP session with the router p.
func (su *suite) sessionWith(p *harness.Process) *mcp.ClientSession {
	su.t.Helper()
	hc := &http.Client{Transport: harness.Bearer(su.s.Credentials.RouterMCPToken)}
	cs := must(mcp.NewClient(&mcp.Implementation{Name: "e2e-fleet"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: p.URL() + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil))(su.t)
	su.t.Cleanup(func() { cs.Close() })
	return cs
}

// startBalancer serves a round-robin load balancer over backends on a free loopback port and
// returns its base URL. Like a real one it takes a backend that refuses connections out of
// the rotation for that request (it tries the next); a request that a backend dies in the
// middle of is answered 502, as a real one would.
func startBalancer(t *testing.T, backends []string) string {
	t.Helper()
	ln := must(net.Listen("tcp", "127.0.0.1:0"))(t)
	b := &balancer{backends: backends, transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	srv := &http.Server{Handler: &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.Out.URL.Scheme, r.Out.URL.Host = "http", "backend" },
		Transport: b, FlushInterval: -1,
		ErrorLog: log.New(io.Discard, "", 0), // a backend killed mid-request is this test's point
	}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); b.transport.CloseIdleConnections() })
	return (&url.URL{Scheme: "http", Host: ln.Addr().String()}).String()
}

type balancer struct {
	backends  []string
	next      atomic.Uint64
	transport *http.Transport
}

// RoundTrip sends r to the next backend, or to the one after it when that one refuses the
// connection (nothing of the request was sent, so trying another is safe).
func (b *balancer) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			return nil, err
		}
		r.Body.Close()
	}
	start := b.next.Add(1)
	var err error
	for k := range uint64(len(b.backends)) {
		out := r.Clone(r.Context())
		out.URL.Host = b.backends[(start+k)%uint64(len(b.backends))]
		out.Host = out.URL.Host
		out.Body = io.NopCloser(bytes.NewReader(body))
		var resp *http.Response
		if resp, err = b.transport.RoundTrip(out); err == nil {
			return resp, nil
		}
		var op *net.OpError
		if !errors.As(err, &op) || op.Op != "dial" {
			return nil, err
		}
	}
	return nil, err
}
