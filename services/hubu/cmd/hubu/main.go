// Command hubu is the Hubu authorization service: `hubu serve`, `hubu migrate up|down|version`,
// `hubu operator create` and `hubu service create`.
package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"hubu.dev/hubu/kit/command"
	"hubu.dev/hubu/kit/failpoint"
	"hubu.dev/hubu/kit/httpjson"
	"hubu.dev/hubu/kit/metrics"
	"hubu.dev/hubu/kit/pglisten"
	"hubu.dev/hubu/kit/pgstart"
	"hubu.dev/hubu/kit/tracing"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/console"
	"hubu.dev/hubu/services/hubu/gongbuexec"
	"hubu.dev/hubu/services/hubu/httpserver"
	"hubu.dev/hubu/services/hubu/lifecycle"
	"hubu.dev/hubu/services/hubu/oauth"
	"hubu.dev/hubu/services/hubu/oauth/upstream"
	"hubu.dev/hubu/services/hubu/postgres"
	hubusql "hubu.dev/hubu/sql/hubu"
	"hubu.dev/hubu/sql/migrator"
)

const usage = `usage:
  hubu serve --listen ADDR --database-url URL [--approval-ttl 24h] [--gongbu-url URL --gongbu-token TOKEN] [--cache-ttl 5s]
             [--metrics-listen ADDR] [--metrics-refresh 15s]
             [--oauth-issuer URL --oauth-resource URL[,URL…] [--oidc-issuer URL --oidc-client-id ID]]
  hubu migrate up|down|version --database-url URL
  hubu operator create --name NAME --database-url URL
  hubu service create --name NAME --database-url URL
  hubu router create --name NAME --database-url URL
Settings fall back to HUBU_LISTEN, HUBU_DATABASE_URL, HUBU_APPROVAL_TTL, HUBU_RETRY_AFTER,
HUBU_GONGBU_URL, HUBU_GONGBU_TOKEN, HUBU_CACHE_TTL, HUBU_METRICS_LISTEN, HUBU_METRICS_REFRESH, HUBU_OAUTH_ISSUER,
HUBU_OAUTH_RESOURCES, HUBU_OIDC_ISSUER, HUBU_OIDC_CLIENT_ID and HUBU_OIDC_CLIENT_SECRET; the secrets (HUBU_DATABASE_URL,
HUBU_GONGBU_TOKEN, HUBU_OIDC_CLIENT_SECRET) may instead be in a file named by HUBU_DATABASE_URL_FILE, HUBU_GONGBU_TOKEN_FILE
or HUBU_OIDC_CLIENT_SECRET_FILE. hubu serve also serves the approval console at /console (sign in with an operator
token) and, with --oauth-issuer, the OAuth authorization server for routers at /oauth/ (people sign in with a code
from hubuctl agent invite, or through the OpenID Connect provider). hubu router create makes a router's credential.`

func main() { command.Main("hubu", run) }

// run is the whole program; tests and the e2e harness call it in-process.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return command.OneLine(command.Dispatch(args, usage, stdout, stderr, command.Commands{
		"serve": func(rest []string) error { return serve(ctx, rest, getenv, stderr) },
		"migrate": func(rest []string) error {
			getenv, err := command.WithSecret(getenv, "HUBU_DATABASE_URL")
			if err != nil {
				return err
			}
			return migrator.Command("hubu", "HUBU_DATABASE_URL", hubusql.Migrations(), rest, getenv, stdout, stderr)
		},
		"operator": func(rest []string) error { return createCredential(ctx, "operator", rest, getenv, stdout, stderr) },
		"service":  func(rest []string) error { return createCredential(ctx, "service", rest, getenv, stdout, stderr) },
		"router":   func(rest []string) error { return createCredential(ctx, "router", rest, getenv, stdout, stderr) },
	}))
}

func databaseURLFlag(fs *command.FlagSet) *string {
	return fs.Secret("database-url", "HUBU_DATABASE_URL", "PostgreSQL URL")
}

func requireDatabaseURL(u string) error { return migrator.CheckURL(u, "HUBU_DATABASE_URL") }

func serve(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := command.NewFlagSet("hubu serve", getenv, stderr)
	listen := fs.String("listen", "HUBU_LISTEN", "127.0.0.1:8081", "address to listen on; port 0 picks one")
	dbURL := databaseURLFlag(fs)
	// Text rather than a duration flag, so that a bad value says what a good one looks like.
	ttlText := fs.String("approval-ttl", "HUBU_APPROVAL_TTL", "24h", "how long a held operation waits for approval")
	retryAfter := fs.Duration("retry-after", "HUBU_RETRY_AFTER", 10*time.Second, "re-send a decision the executor has not acknowledged after this long")
	gongbuURL := fs.String("gongbu-url", "HUBU_GONGBU_URL", "", "Gongbu's base URL; without it decisions wait in dispatching")
	gongbuToken := fs.Secret("gongbu-token", "HUBU_GONGBU_TOKEN", "the service token Gongbu accepts from Hubu")
	cacheTTL := fs.Duration("cache-ttl", "HUBU_CACHE_TTL", 5*time.Second,
		"the longest a cached credential or price is served (a change reaches the cache on its notification); 0 turns the cache off")
	metricsListen := fs.String("metrics-listen", "HUBU_METRICS_LISTEN", "",
		"address to serve /metrics on, alone, instead of on --listen (which then serves no /metrics); port 0 picks one")
	metricsRefresh := fs.Duration("metrics-refresh", "HUBU_METRICS_REFRESH", metrics.DefaultRefresh,
		"the longest the state gauges of one database read are served; a scrape after that reads them again")
	oauthIssuer := fs.String("oauth-issuer", "HUBU_OAUTH_ISSUER", "",
		"be the OAuth authorization server for routers in OAuth mode, at this public URL (https; http only on loopback, where port 0 is the bound port)")
	oauthResources := fs.String("oauth-resource", "HUBU_OAUTH_RESOURCES", "",
		"the routers' resource URLs (their public /mcp URLs, comma-separated) that tokens may be issued for")
	oidcIssuer := fs.String("oidc-issuer", "HUBU_OIDC_ISSUER", "", "let people sign in through this OpenID Connect provider (its issuer URL)")
	oidcClientID := fs.String("oidc-client-id", "HUBU_OIDC_CLIENT_ID", "", "Hubu's client id at the OpenID Connect provider")
	oidcSecret := fs.Secret("oidc-client-secret", "HUBU_OIDC_CLIENT_SECRET", "Hubu's client secret at the OpenID Connect provider")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := requireDatabaseURL(*dbURL); err != nil {
		return err
	}
	if *oauthIssuer == "" && (*oauthResources != "" || *oidcIssuer != "") {
		return errors.New("--oauth-resource and --oidc-issuer need --oauth-issuer: Hubu is then the routers' authorization server")
	}
	if (*oidcIssuer == "") != (*oidcClientID == "") || (*oidcIssuer != "" && *oidcSecret == "") {
		return errors.New("--oidc-issuer, --oidc-client-id and HUBU_OIDC_CLIENT_SECRET go together")
	}
	var (
		executor hubu.Executor
		images   hubu.Images
		gx       *gongbuexec.Executor
	)
	if *gongbuURL != "" {
		if *gongbuToken == "" {
			return errors.New("--gongbu-token (or HUBU_GONGBU_TOKEN) is required with --gongbu-url")
		}
		if err := command.RequireHTTPURL("gongbu-url", *gongbuURL); err != nil {
			return err
		}
		var err error
		gx, err = gongbuexec.New(*gongbuURL, *gongbuToken, &http.Client{Transport: httpjson.Timeout(tracing.Transport(httpjson.PooledTransport(), "gongbu"), 30*time.Second)})
		if err != nil {
			return fmt.Errorf("--gongbu-url: %v", err)
		}
		executor, images = gx, gx
	}
	if *retryAfter <= 0 {
		return errors.New("--retry-after must be positive")
	}
	if *cacheTTL < 0 {
		return errors.New("--cache-ttl must not be negative (0 turns the cache off)")
	}
	if *metricsRefresh <= 0 {
		return errors.New("--metrics-refresh must be positive")
	}
	ttl, err := time.ParseDuration(*ttlText)
	if err != nil || ttl <= 0 {
		return fmt.Errorf("--approval-ttl %q is not a positive duration such as 24h", *ttlText)
	}
	logger := command.NewLogger(stderr, "hubu")
	command.TuneGC(getenv, gcPercent, memoryLimit)
	stopTracing, err := command.StartTracing(ctx, "hubu", logger)
	if err != nil {
		return fmt.Errorf("tracing: %v", err)
	}
	defer stopTracing()

	poolURL, singleURL, err := poolURLs(*dbURL)
	if err != nil {
		return err
	}
	pool, err := pgstart.Open(ctx, poolURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := migrator.RequireLatest("hubu", singleURL, hubusql.Migrations()); err != nil {
		return err
	}

	bg, stopBG := context.WithCancel(ctx)
	defer stopBG()
	now := failpoint.Clock()
	store := postgres.NewStore(pool, ttl)
	var decisionKey ed25519.PrivateKey
	if gx != nil {
		// Every decision handed to Gongbu goes with Hubu's signature, and every agent's
		// authorization with a read capability for its router's long-poll: Gongbu checks both
		// with the public key it reads from Hubu instead of asking Hubu each time.
		if decisionKey, err = store.DecisionKey(ctx, now()); err != nil {
			return err
		}
		gx.Signer = &gongbuexec.Signer{Key: decisionKey, Now: now}
	}
	if *cacheTTL > 0 {
		// The listener has a connection of its own; it is stopped, and waited for, on shutdown.
		listener := pglisten.New(singleURL, logger)
		store.Cache = postgres.NewCache(listener, &postgres.CacheOptions{TTL: *cacheTTL})
		listening := make(chan struct{})
		go func() {
			defer close(listening)
			listener.Run(bg)
		}()
		defer func() {
			stopBG()
			<-listening
		}()
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		metrics.NewBuildInfo("hubu"), metrics.NewPoolCollector("hubu", pool),
		httpserver.NewOperationsCollector(pool, &metrics.QueryOptions{Refresh: *metricsRefresh, Now: now, Logger: logger}))
	life := &lifecycle.Service{Store: store, Executor: executor, Images: images, Logger: logger, Now: now, RetryAfter: *retryAfter,
		HandOffs: lifecycle.NewHandOffCounter(reg)}
	srv := &httpserver.Server{Store: store, Lifecycle: life, Logger: logger, Now: now, Images: images, DecisionKey: decisionKey,
		Console: console.New(store, &console.Options{Logger: logger, Now: now, Images: images})}

	ln, err := command.Listen(*listen)
	if err != nil {
		return err
	}
	// With a metrics listener, the API's serves no /metrics: who reaches Hubu's API cannot
	// make it read its database for the state gauges.
	var metricsLn net.Listener
	apiReg := prometheus.Registerer(reg)
	addrs := []any{"addr", ln.Addr().String()}
	if *metricsListen != "" {
		if metricsLn, err = command.Listen(*metricsListen); err != nil {
			ln.Close()
			return err
		}
		apiReg = metrics.RegistererOnly(reg)
		addrs = append(addrs, "metrics_addr", metricsLn.Addr().String())
	}
	if *oauthIssuer != "" {
		issuer := boundIssuer(*oauthIssuer, ln.Addr())
		var up *upstream.Provider
		if *oidcIssuer != "" {
			up, err = upstream.New(ctx, upstream.Config{Issuer: *oidcIssuer, ClientID: *oidcClientID, ClientSecret: *oidcSecret,
				RedirectURL: strings.TrimRight(issuer, "/") + "/oauth/signin/oidc/callback"})
			if err != nil {
				ln.Close()
				return fmt.Errorf("--oidc-issuer: %v", err)
			}
		}
		as, err := oauth.New(ctx, oauth.Config{Issuer: issuer, Resources: splitList(*oauthResources), Store: store, Logger: logger, Now: now, Upstream: up})
		if err != nil {
			ln.Close()
			return fmt.Errorf("--oauth-issuer: %v", err)
		}
		srv.OAuth = as
		addrs = append(addrs, "oauth_issuer", issuer)
	}
	apiSrv := command.NewHTTPServer(tracing.Handler(srv.Handler(apiReg)))
	logger.Info("listening", addrs...)

	go life.Run(bg, min(5*time.Second, *retryAfter))
	return metrics.ServeAlongside(ctx, metricsLn, reg, logger, func(ctx context.Context) error {
		return command.Serve(ctx, apiSrv, ln, logger, command.ShutdownGrace, nil)
	})
}

func createCredential(ctx context.Context, kind string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "create" {
		return fmt.Errorf("usage: hubu %s create --name NAME --database-url URL", kind)
	}
	fs := command.NewFlagSet("hubu "+kind+" create", getenv, stderr)
	name := fs.String("name", "", "", "who the token is for")
	dbURL := databaseURLFlag(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if err := requireDatabaseURL(*dbURL); err != nil {
		return err
	}
	if *name == "" {
		return errors.New("--name is required")
	}
	pool, err := pgstart.Open(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	role := map[string]hubu.Role{"operator": hubu.RoleOperator, "service": hubu.RoleService, "router": hubu.RoleRouter}[kind]
	token, err := postgres.NewStore(pool, 0).CreateCredential(ctx, role, *name, time.Now())
	if err != nil {
		return fmt.Errorf("create %s credential: %v", kind, err)
	}
	fmt.Fprintln(stdout, token) // shown once; Hubu keeps only its hash
	return nil
}

// boundIssuer is the issuer URL with a port 0 replaced by the port Hubu bound (a loopback
// issuer in tests and local stacks).
func boundIssuer(issuer string, addr net.Addr) string {
	u, err := url.Parse(issuer)
	if err != nil || u.Port() != "0" {
		return issuer
	}
	if tcp, ok := addr.(*net.TCPAddr); ok {
		u.Host = net.JoinHostPort(u.Hostname(), strconv.Itoa(tcp.Port))
	}
	return u.String()
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
