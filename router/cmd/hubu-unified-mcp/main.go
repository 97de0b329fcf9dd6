// Command hubu-unified-mcp is the router: the MCP server an agent's harness launches. It
// takes each paid call's identity from the harness (_meta), never from the model's
// arguments, records it durably, and forwards it to Hubu under a private operation key.
package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"hubu.dev/hubu/kit/buildinfo"
	"hubu.dev/hubu/kit/command"
	"hubu.dev/hubu/kit/httpjson"
	"hubu.dev/hubu/kit/metrics"
	"hubu.dev/hubu/kit/tracing"
	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/router/identity"
	"hubu.dev/hubu/router/mcpserver"
	"hubu.dev/hubu/router/oauthrs"
	"hubu.dev/hubu/router/registry"
)

const usage = `usage:
  hubu-unified-mcp --hubu-url URL --gongbu-url URL [--state FILE|URL] [--http ADDR [--session-timeout 1h]] [--diagnose-meta[=FILE]]
                   [--identity-config FILE] [--preallocated-keys FILE] [--wait 30s] [--allow-private-image-hosts]
                   [--oauth-issuer URL --resource URL]
  hubu-unified-mcp preallocate --file FILE --count N
  hubu-unified-mcp installation-id [--state FILE|URL]
  hubu-unified-mcp prune --state FILE|URL --older-than DURATION (--backup FILE | --backup-taken) [--dry-run]
  hubu-unified-mcp backup [--state FILE] --to FILE|-
  hubu-unified-mcp support-matrix FILE...
The agent's token comes from HUBU_AGENT_TOKEN; with --http, clients must present ROUTER_MCP_TOKEN.
With --http, --oauth-issuer and --resource the router is also an OAuth protected resource: each person signs
in at Hubu (the issuer) from their client, and their token acts for their own agent; the router then needs
its own Hubu credential in HUBU_ROUTER_TOKEN (hubu router create), and the static tokens become optional.
Each token may instead be in a file named by HUBU_AGENT_TOKEN_FILE, ROUTER_MCP_TOKEN_FILE or
HUBU_ROUTER_TOKEN_FILE, and the registry's location (a postgres:// URL may hold a password) in one named by
ROUTER_STATE_FILE. Flags fall back to HUBU_URL, GONGBU_URL, ROUTER_STATE, ROUTER_HTTP, ROUTER_SESSION_TIMEOUT,
ROUTER_DIAGNOSE_META, ROUTER_IDENTITY_CONFIG, ROUTER_PREALLOCATED_KEYS, ROUTER_WAIT,
ROUTER_ALLOW_PRIVATE_IMAGE_HOSTS, ROUTER_OAUTH_ISSUER and ROUTER_RESOURCE.
Without --http the router speaks stdio. --state is the registry: a SQLite file, or a postgres:// URL that a
fleet of routers (behind a load balancer) shares.`

func main() {
	command.Main("hubu-unified-mcp", func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
		return command.OneLine(run(ctx, args, getenv, os.Stdin, stdout, stderr))
	})
}

// diagnoseFlag is --diagnose-meta or --diagnose-meta=FILE.
type diagnoseFlag struct {
	on   bool
	file string
}

func (d *diagnoseFlag) String() string   { return d.file }
func (d *diagnoseFlag) IsBoolFlag() bool { return true }
func (d *diagnoseFlag) Set(v string) error {
	switch v {
	case "true":
		d.on, d.file = true, ""
	case "false":
		d.on, d.file = false, ""
	default:
		d.on, d.file = true, v
	}
	return nil
}

// run is the whole program; tests call it in-process.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "preallocate" {
		return preallocate(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "support-matrix" {
		return supportMatrix(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "prune" {
		return prune(ctx, args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "backup" {
		return backup(ctx, args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "installation-id" {
		return installationID(ctx, args[1:], getenv, stdout, stderr)
	}
	getenv, err := stateSecret(getenv)
	if err != nil {
		return err
	}
	fs := command.NewFlagSet("hubu-unified-mcp", getenv, stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, usage); fs.PrintDefaults() }
	hubuURL := fs.String("hubu-url", "HUBU_URL", "", "Hubu's base URL")
	gongbuURL := fs.String("gongbu-url", "GONGBU_URL", "", "Gongbu's base URL")
	state := stateFlag(fs)
	httpAddr := fs.String("http", "ROUTER_HTTP", "", "serve streamable HTTP on ADDR instead of stdio")
	diag := &diagnoseFlag{}
	switch v := getenv("ROUTER_DIAGNOSE_META"); strings.ToLower(v) {
	case "", "0", "false", "no":
	case "1", "true", "yes":
		_ = diag.Set("true")
	default:
		_ = diag.Set(v)
	}
	fs.Var(diag, "diagnose-meta", "log the shape of each call's _meta (never values) to stderr, or to FILE")
	identityConfig := fs.String("identity-config", "ROUTER_IDENTITY_CONFIG", "", "accepted envelope platforms and their keys")
	preallocated := fs.String("preallocated-keys", "ROUTER_PREALLOCATED_KEYS", "", "claim operation keys from this file; only Codex calls may start operations")
	wait := fs.Duration("wait", "ROUTER_WAIT", 30*time.Second, "how long a spend waits for its image before answering running")
	sessionTimeout := fs.Duration("session-timeout", "ROUTER_SESSION_TIMEOUT", time.Hour,
		"with --http, close a session that no request has used for this long (0: never); its client starts a new one")
	allowPrivateImages := fs.Bool("allow-private-image-hosts", "ROUTER_ALLOW_PRIVATE_IMAGE_HOSTS", false,
		"download result images from loopback, private and link-local addresses too; only for a local stack, "+
			"such as make up's mockflux on 127.0.0.1")
	oauthIssuer := fs.String("oauth-issuer", "ROUTER_OAUTH_ISSUER", "",
		"with --http, accept OAuth tokens from this authorization server (Hubu's public issuer URL): each acts for its person's agent")
	resource := fs.String("resource", "ROUTER_RESOURCE", "",
		"with --oauth-issuer, this router's resource URL: its /mcp URL as clients reach it (tokens must be bound to it)")
	if err := fs.ParseNoArgs(args); err != nil {
		return err
	}
	for _, f := range []struct{ name, value string }{{"hubu-url", *hubuURL}, {"gongbu-url", *gongbuURL}} {
		if err := command.RequireHTTPURL(f.name, f.value); err != nil {
			return err
		}
	}
	agentToken, err := command.Secret(getenv, "HUBU_AGENT_TOKEN")
	if err != nil {
		return err
	}
	mcpToken, err := command.Secret(getenv, "ROUTER_MCP_TOKEN")
	if err != nil {
		return err
	}
	routerToken, err := command.Secret(getenv, "HUBU_ROUTER_TOKEN")
	if err != nil {
		return err
	}
	oauthMode := *oauthIssuer != "" || *resource != ""
	switch {
	case oauthMode && (*oauthIssuer == "" || *resource == "" || *httpAddr == ""):
		return errors.New("OAuth mode needs --http, --oauth-issuer (Hubu's issuer URL) and --resource (this router's /mcp URL)")
	case oauthMode && routerToken == "":
		return errors.New("OAuth mode needs HUBU_ROUTER_TOKEN: the router's own Hubu credential (hubu router create)")
	case !oauthMode && agentToken == "":
		return errors.New("HUBU_AGENT_TOKEN is not set: the router needs the agent's Hubu token")
	case !oauthMode && *httpAddr != "" && mcpToken == "":
		return errors.New("--http needs ROUTER_MCP_TOKEN: without it anyone who reaches the port could forge _meta")
	case (agentToken == "") != (mcpToken == "") && oauthMode:
		return errors.New("HUBU_AGENT_TOKEN and ROUTER_MCP_TOKEN go together: the static token acts for that agent")
	}
	if *wait <= 0 {
		return errors.New("--wait must be positive")
	}
	if *sessionTimeout < 0 {
		return errors.New("--session-timeout must not be negative (0 keeps sessions until their client ends them)")
	}
	if *state, err = statePath(*state, getenv); err != nil {
		return err
	}
	logger := command.NewLogger(stderr, "hubu-unified-mcp")
	command.TuneGC(getenv, gcPercent, 0)
	stopTracing, err := command.StartTracing(ctx, "hubu-unified-mcp", logger)
	if err != nil {
		return fmt.Errorf("tracing: %v", err)
	}
	defer stopTracing()

	var idCfg *identity.Config
	if *identityConfig != "" {
		if idCfg, err = identity.LoadConfig(*identityConfig); err != nil {
			return fmt.Errorf("--identity-config: %v", err)
		}
	}
	opts := &registry.Options{}
	if *preallocated != "" {
		keys, err := registry.OpenPreallocated(*preallocated, false)
		if err != nil {
			return fmt.Errorf("--preallocated-keys: %v", err)
		}
		defer keys.Close()
		if free, err := keys.Free(ctx); err != nil || free == 0 {
			return fmt.Errorf("--preallocated-keys %s has no free keys (make some with hubu-unified-mcp preallocate)", *preallocated)
		}
		opts.Keys = keys
	}
	reg, err := registry.Open(ctx, *state, opts)
	if err != nil {
		return fmt.Errorf("--state %s: %v", registry.Redact(*state), err) // a URL's password is never shown
	}
	defer reg.Close()

	var diagOut io.Writer
	if diag.on {
		diagOut = stderr
		if diag.file != "" {
			f, err := os.OpenFile(diag.file, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
			if err != nil {
				return fmt.Errorf("--diagnose-meta: %v", err)
			}
			defer f.Close()
			diagOut = f
		}
	}
	// One pool of connections to both backends; each client traces its calls as made to its peer.
	pool := backendTransport(logger)
	backend := func(peer string) *http.Client {
		return &http.Client{Transport: httpjson.Timeout(tracing.Transport(pool, peer), 60*time.Second)}
	}
	// A call acts for its caller: a person's grant through the router's own credential, or the
	// router's one agent (the static token, stdio).
	auth := func(ctx context.Context, r *http.Request) error {
		if c := mcpserver.CallerFrom(ctx); c.Grant != "" {
			r.Header.Set("Authorization", "Bearer "+routerToken)
			r.Header.Set(contract.GrantHeader, c.Grant)
			return nil
		}
		if agentToken == "" {
			return errors.New("this router has no agent of its own: only OAuth tokens act through it")
		}
		r.Header.Set("Authorization", "Bearer "+agentToken)
		return nil
	}
	hubu, err := hubuapi.NewClientWithResponses(*hubuURL, hubuapi.WithHTTPClient(backend("hubu")), hubuapi.WithRequestEditorFn(auth))
	if err != nil {
		return err
	}
	gongbu, err := gongbuapi.NewClientWithResponses(*gongbuURL, gongbuapi.WithHTTPClient(backend("gongbu")), gongbuapi.WithRequestEditorFn(auth))
	if err != nil {
		return err
	}
	counters := prometheus.NewRegistry()
	counters.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		metrics.NewBuildInfo("router"))
	images := mcpserver.ImageClient(*allowPrivateImages, 30*time.Second, logger)
	images.Transport = tracing.Transport(images.Transport, "images")
	router := mcpserver.New(mcpserver.Config{
		Registry: reg, Hubu: hubu, Gongbu: gongbu, Identity: idCfg, Logger: logger, Diagnose: diagOut, Wait: *wait,
		Images: images, AllowPrivateImageHosts: *allowPrivateImages, Metrics: mcpserver.NewMetrics(counters),
	})
	server := router.Server(buildinfo.Read().Version)
	logger.Info("router ready", "installation_id", reg.InstallationID(), "transport", map[bool]string{true: "http", false: "stdio"}[*httpAddr != ""],
		"state", registry.Redact(*state), "allow_private_image_hosts", *allowPrivateImages)

	if *httpAddr == "" {
		err := server.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}})
		if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
			return err
		}
		return nil
	}
	var protected *oauthrs.Resource
	if oauthMode {
		protected, err = oauthrs.New(oauthrs.Config{
			Resource: *resource, Issuer: *oauthIssuer, IntrospectionURL: strings.TrimRight(*hubuURL, "/") + "/oauth/introspect",
			RouterToken: routerToken, StaticToken: mcpToken, Client: backend("hubu"),
		})
		if err != nil {
			return err
		}
		logger.Info("oauth protected resource", "resource", *resource, "authorization_server", *oauthIssuer, "static_token", mcpToken != "")
	}
	return serveHTTP(ctx, *httpAddr, mcpToken, protected, server, counters, *sessionTimeout, logger)
}

// backendTransport is the transport to Hubu and Gongbu: cleartext HTTP/2, every call in flight
// to one of them on one connection, and HTTP/1.1 to a Hubu or Gongbu of an earlier release
// (httpjson.H2CTransport). Over HTTP/1.1 the router holds a connection for every call in
// flight, and keeps them pooled for the next; their requests and answers are small JSON
// documents, so each connection reads and writes through 2 KiB buffers rather than net/http's
// 4 KiB ones (those were a quarter of the router's heap under make loadtest's 200 sessions).
// A connection idle for 30 s (net/http: 90 s) is closed, so that a burst's connections do not
// outstay it by long. Which protocol each backend speaks is logged when first found and when
// it changes.
func backendTransport(logger *slog.Logger) *httpjson.H2CTransport {
	t := httpjson.PooledTransport()
	t.ReadBufferSize, t.WriteBufferSize = 2<<10, 2<<10
	t.IdleConnTimeout = 30 * time.Second
	h2 := httpjson.NewH2CTransport(t)
	h2.Logger = logger
	return h2
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// serveHTTP serves streamable HTTP at /mcp; every request must carry the router's token. A
// session no request has used for sessionTimeout is closed (0: never): every open session
// holds a few kilobytes and a goroutine, and a client that goes away without ending its
// session (most harnesses just exit) would otherwise leave them behind for good. A client that
// comes back after that is answered 404 and, as the MCP specification requires of it, starts
// a new session; a session's id is never a call's identity, so nothing is lost.
//
// /metrics, like /healthz, needs no token: its labels are tools and resolutions, never a
// token, key, call id or handle, and a Prometheus should not hold the token that spends.
//
// Every request but those two is traced (tracing.Handler); a call's own span continues the
// trace context its _meta carries, which wins over the HTTP request's (see mcpserver).
//
// In OAuth mode (protected set) /mcp takes the static token or an OAuth token (oauthrs), and
// the protected resource metadata is served beside it.
func serveHTTP(ctx context.Context, addr, token string, protected *oauthrs.Resource, server *mcp.Server, counters prometheus.Gatherer, sessionTimeout time.Duration, logger *slog.Logger) error {
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{SessionTimeout: sessionTimeout})
	want := sha256.Sum256([]byte(token))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(counters, promhttp.HandlerOpts{}))
	if protected != nil {
		mux.Handle(protected.MetadataPath(), protected.MetadataHandler())
		if protected.MetadataPath() != "/.well-known/oauth-protected-resource" {
			mux.Handle("/.well-known/oauth-protected-resource", protected.MetadataHandler())
		}
		mux.Handle("/mcp", protected.Require(handler))
		return listenAndServe(ctx, addr, mux, logger)
	}
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		sum := sha256.Sum256([]byte(got))
		if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(want[:], sum[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hubu-unified-mcp"`)
			http.Error(w, "a valid bearer token (ROUTER_MCP_TOKEN) is required", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	return listenAndServe(ctx, addr, mux, logger)
}

func listenAndServe(ctx context.Context, addr string, mux *http.ServeMux, logger *slog.Logger) error {
	ln, err := command.Listen(addr)
	if err != nil {
		return err
	}
	srv := command.NewHTTPServer(tracing.Handler(mux))
	srv.WriteTimeout = 0 // a streamable HTTP session holds its event stream open
	logger.Info("listening", "addr", ln.Addr().String(), "path", "/mcp")
	return command.Serve(ctx, srv, ln, logger, command.ShutdownGrace, nil)
}

// stateFlag is --state, the registry: a file, or a Postgres database that a router fleet shares;
// statePath says where it is when unset.
func stateFlag(fs *command.FlagSet) *string {
	return fs.String("state", "ROUTER_STATE", "",
		"the registry: a SQLite file (by default $XDG_STATE_HOME/hubu/router.db), or a postgres:// URL that a router fleet shares")
}

// stateSecret lets ROUTER_STATE come from the file ROUTER_STATE_FILE names, as every secret
// setting may: a Postgres registry's URL can hold a password.
func stateSecret(getenv func(string) string) (func(string) string, error) {
	return command.WithSecret(getenv, "ROUTER_STATE")
}

// statePath is the registry --state names (a file or a postgres:// URL), by default the file in
// the user's state directory (XDG).
func statePath(state string, getenv func(string) string) (string, error) {
	if state != "" {
		return state, nil
	}
	dir := getenv("XDG_STATE_HOME")
	if dir == "" {
		home := getenv("HOME")
		if home == "" {
			return "", errors.New("--state is not set and neither XDG_STATE_HOME nor HOME is: say where the registry lives")
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "hubu", "router.db"), nil
}

// preallocate makes a file of preallocated codex operation keys.
func preallocate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hubu-unified-mcp preallocate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("file", "", "the preallocated-keys file to create or extend")
	count := fs.Int("count", 0, "how many keys to add")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" || *count <= 0 {
		return errors.New("preallocate needs --file and a positive --count")
	}
	keys, err := registry.OpenPreallocated(*file, true)
	if err != nil {
		return err
	}
	defer keys.Close()
	batch := make([]string, *count)
	for i := range batch {
		batch[i] = contract.NewOperationKey("codex")
	}
	if err := keys.Add(ctx, batch); err != nil {
		return err
	}
	free, err := keys.Free(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "free keys: "+strconv.FormatInt(free, 10)) // never the keys themselves
	return nil
}
