// Command gongbu is the Gongbu executor: `gongbu serve`, `gongbu migrate up|down|version`,
// `gongbu reconcile` and `gongbu resolve`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"hubu.dev/hubu/kit/failpoint"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/execution"
	"hubu.dev/hubu/services/gongbu/flux"
	"hubu.dev/hubu/services/gongbu/httpserver"
	"hubu.dev/hubu/services/gongbu/hubulink"
	"hubu.dev/hubu/services/gongbu/postgres"
	"hubu.dev/hubu/services/gongbu/reconcile"
	gongbusql "hubu.dev/hubu/sql/gongbu"
	"hubu.dev/hubu/sql/migrator"
)

const usage = `usage:
  gongbu serve --listen ADDR --database-url URL --hubu-url URL --hubu-token TOKEN --service-token TOKEN
               --flux-url URL --flux-key KEY [--flux-idempotent] [--flux-timeout 60s]
               [--flux-polling-hosts HOST,...] [--flux-sample-hosts HOST,...]
               [--poll-interval 1s] [--poll-deadline 10m] [--lease DURATION]
  gongbu migrate up|down|version --database-url URL
  gongbu reconcile --hubu-url URL --hubu-token TOKEN --gongbu-url URL --service-token TOKEN --flux-url URL [--require-final]
  gongbu resolve --database-url URL --decision ID (--charged-micros N | --not-charged)
  gongbu renew-epoch --database-url URL   (after restoring the database from a backup)
Settings fall back to GONGBU_LISTEN, GONGBU_DATABASE_URL, GONGBU_HUBU_URL, GONGBU_HUBU_TOKEN,
GONGBU_SERVICE_TOKEN, GONGBU_FLUX_URL, GONGBU_FLUX_KEY, GONGBU_FLUX_IDEMPOTENT, GONGBU_FLUX_TIMEOUT,
GONGBU_FLUX_POLLING_HOSTS, GONGBU_FLUX_SAMPLE_HOSTS, GONGBU_POLL_INTERVAL, GONGBU_POLL_DEADLINE,
GONGBU_LEASE and GONGBU_URL.`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	default:
		fmt.Fprintln(os.Stderr, "gongbu:", err)
		os.Exit(2)
	}
}

// run is the whole program; tests and the e2e harness call it in-process. Its error is one
// line, whatever a dependency put in its message (the driver's connection errors span lines).
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if err := dispatch(ctx, args, getenv, stdout, stderr); err != nil {
		return oneLineError{err}
	}
	return nil
}

type oneLineError struct{ err error }

func (e oneLineError) Error() string { return strings.Join(strings.Fields(e.err.Error()), " ") }
func (e oneLineError) Unwrap() error { return e.err }

func dispatch(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return errors.New("missing command")
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		return serve(ctx, rest, getenv, stderr)
	case "migrate":
		return migrator.Command("gongbu", "GONGBU_DATABASE_URL", gongbusql.Migrations(), rest, getenv, stdout, stderr)
	case "reconcile":
		return reconcileCmd(ctx, rest, getenv, stdout, stderr)
	case "resolve":
		return resolveCmd(ctx, rest, getenv, stdout, stderr)
	case "renew-epoch":
		return renewEpochCmd(ctx, rest, getenv, stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return nil
	default:
		fmt.Fprintln(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("gongbu "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// envDuration reads a duration from the environment, def when it is unset. A value that is
// no duration is an error, never a silent fallback to def (the flag's own parser reports a
// bad value given on the command line).
func envDuration(getenv func(string) string, key string, def time.Duration) (time.Duration, error) {
	v := getenv(key)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s must be a duration such as 90s or 10m", key)
	}
	return d, nil
}

func envOr(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}

func requireDatabaseURL(u string) error { return migrator.CheckURL(u, "GONGBU_DATABASE_URL") }

// requireHTTPURL checks a base URL setting.
func requireHTTPURL(flagName, v string) error {
	if v == "" {
		return fmt.Errorf("--%s is required", flagName)
	}
	if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--%s must be an http(s) URL", flagName)
	}
	return nil
}

func serve(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	listen := fs.String("listen", envOr(getenv, "GONGBU_LISTEN", "127.0.0.1:8082"), "address to listen on; port 0 picks one (env GONGBU_LISTEN)")
	dbURL := fs.String("database-url", getenv("GONGBU_DATABASE_URL"), "PostgreSQL URL (env GONGBU_DATABASE_URL)")
	hubuURL := fs.String("hubu-url", getenv("GONGBU_HUBU_URL"), "Hubu's base URL (env GONGBU_HUBU_URL)")
	hubuToken := fs.String("hubu-token", getenv("GONGBU_HUBU_TOKEN"), "a Hubu service token, from `hubu service create` (env GONGBU_HUBU_TOKEN)")
	serviceToken := fs.String("service-token", getenv("GONGBU_SERVICE_TOKEN"), "the token Hubu presents to Gongbu (env GONGBU_SERVICE_TOKEN)")
	fluxURL := fs.String("flux-url", getenv("GONGBU_FLUX_URL"), "the FLUX API's base URL, or mockflux's (env GONGBU_FLUX_URL)")
	fluxKey := fs.String("flux-key", getenv("GONGBU_FLUX_KEY"), "the FLUX API key (env GONGBU_FLUX_KEY)")
	fluxIdem := false
	if v := getenv("GONGBU_FLUX_IDEMPOTENT"); v != "" {
		var err error
		if fluxIdem, err = strconv.ParseBool(v); err != nil {
			return errors.New("GONGBU_FLUX_IDEMPOTENT must be true or false")
		}
	}
	fluxIdempotent := fs.Bool("flux-idempotent", fluxIdem, "the FLUX endpoint honours Idempotency-Key (mockflux does; the real API documents none) (env GONGBU_FLUX_IDEMPOTENT)")
	durations := map[string]time.Duration{}
	for _, d := range []struct {
		key string
		def time.Duration
	}{{"GONGBU_FLUX_TIMEOUT", 60 * time.Second}, {"GONGBU_LEASE", 0}, {"GONGBU_POLL_INTERVAL", time.Second}, {"GONGBU_POLL_DEADLINE", 10 * time.Minute}} {
		v, err := envDuration(getenv, d.key, d.def)
		if err != nil {
			return err
		}
		durations[d.key] = v
	}
	fluxTimeout := durations["GONGBU_FLUX_TIMEOUT"]
	lease := fs.Duration("lease", durations["GONGBU_LEASE"], "how long a worker owns an open execution (env GONGBU_LEASE; default: longer than any submission). "+
		"Shorter than a submission lets another worker take a live one over: with a provider that ignores keys it then becomes indeterminate")
	fs.DurationVar(&fluxTimeout, "flux-timeout", fluxTimeout, "how long one request to the FLUX API may take (env GONGBU_FLUX_TIMEOUT)")
	pollingHosts := fs.String("flux-polling-hosts", getenv("GONGBU_FLUX_POLLING_HOSTS"),
		"comma-separated hosts (host or host:port, exact) besides --flux-url's whose polling URLs Gongbu follows, sending them the FLUX key, "+
			"such as api.us1.bfl.ai,api.eu1.bfl.ai; any other polling URL is refused (env GONGBU_FLUX_POLLING_HOSTS)")
	sampleHosts := fs.String("flux-sample-hosts", getenv("GONGBU_FLUX_SAMPLE_HOSTS"),
		"comma-separated hosts (host or host:port, exact) besides --flux-url's that a result's image URL may be on, "+
			"such as delivery-us1.bfl.ai,delivery-eu1.bfl.ai; a result elsewhere is refused (env GONGBU_FLUX_SAMPLE_HOSTS)")
	pollInterval := fs.Duration("poll-interval", durations["GONGBU_POLL_INTERVAL"], "wait between two polls of a job; also how often the background pass runs (env GONGBU_POLL_INTERVAL)")
	pollDeadline := fs.Duration("poll-deadline", durations["GONGBU_POLL_DEADLINE"], "how long a job may stay pending before it is indeterminate (env GONGBU_POLL_DEADLINE)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := requireDatabaseURL(*dbURL); err != nil {
		return err
	}
	for _, f := range []struct{ name, value string }{{"hubu-url", *hubuURL}, {"flux-url", *fluxURL}} {
		if err := requireHTTPURL(f.name, f.value); err != nil {
			return err
		}
	}
	for _, f := range []struct{ name, value string }{{"hubu-token", *hubuToken}, {"service-token", *serviceToken}, {"flux-key", *fluxKey}} {
		if f.value == "" {
			return fmt.Errorf("--%s is required", f.name)
		}
	}
	if *pollInterval <= 0 || *pollDeadline <= 0 {
		return errors.New("--poll-interval and --poll-deadline must be positive")
	}
	if *lease < 0 {
		return errors.New("--lease must not be negative")
	}
	if fluxTimeout <= 0 || fluxTimeout > 10*time.Minute {
		return errors.New("--flux-timeout must be positive and at most 10m")
	}
	fluxPolling, err := flux.ParseHosts(*pollingHosts)
	if err != nil {
		return fmt.Errorf("--flux-polling-hosts: %v", err)
	}
	fluxSamples, err := flux.ParseHosts(*sampleHosts)
	if err != nil {
		return fmt.Errorf("--flux-sample-hosts: %v", err)
	}
	logger := slog.New(slog.NewJSONHandler(stderr, nil)).With("service", "gongbu")

	pool, err := pgxpool.New(ctx, *dbURL)
	if err != nil {
		return errors.New("--database-url is not a valid PostgreSQL URL")
	}
	defer pool.Close()
	startCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(startCtx); err != nil {
		return fmt.Errorf("cannot reach the database: %v", err)
	}
	if err := requireMigrated(*dbURL); err != nil {
		return err
	}
	hc := &http.Client{Timeout: 60 * time.Second}
	authority, err := hubulink.New(*hubuURL, *hubuToken, hc)
	if err != nil {
		return err
	}
	adapter, err := flux.NewAdapter(flux.Config{BaseURL: *fluxURL, APIKey: *fluxKey, HonoursIdempotency: *fluxIdempotent, Timeout: fluxTimeout,
		PollingHosts: fluxPolling, SampleHosts: fluxSamples})
	if err != nil {
		return err
	}
	store := postgres.NewStore(pool)
	svc := &execution.Service{
		Store: store, Providers: map[string]gongbu.Provider{adapter.Name(): adapter}, Authority: authority,
		Logger: logger, Now: failpoint.Clock(), PollInterval: *pollInterval, PollDeadline: *pollDeadline, CallTimeout: fluxTimeout,
	}
	// A worker's lease outlasts any submission it makes, so no other worker takes a live
	// submission over. --lease may shorten it (the e2e suite does, against mockflux).
	svc.Lease = svc.SubmissionBound() + 30*time.Second
	if *lease > 0 {
		svc.Lease = *lease
	}
	srv := &httpserver.Server{Executions: svc, Authority: authority, ServiceToken: *serviceToken, Logger: logger, Ping: store.Ping}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %v", *listen, err)
	}
	httpSrv := &http.Server{Handler: srv.Handler(reg), ReadHeaderTimeout: 10 * time.Second}
	logger.Info("listening", "addr", ln.Addr().String(), "flux_idempotent", *fluxIdempotent,
		"flux_polling_hosts", fluxPolling, "flux_sample_hosts", fluxSamples)

	bg, stopBG := context.WithCancel(ctx)
	workerDone := make(chan struct{})
	go func() {
		defer close(workerDone)
		svc.Run(bg, *pollInterval)
	}()

	errc := make(chan error, 1)
	go func() { errc <- httpSrv.Serve(ln) }()
	var serveErr error
	select {
	case serveErr = <-errc:
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	// Nothing that calls the provider may outlive the pool: a charged job whose answer is not
	// recorded is lost to Gongbu. So the HTTP server stops first, waiting for its requests,
	// then the submissions they started (tracked by the service, in case a request ended
	// before its submission did), then the background worker (its submissions outlive the
	// cancellation); the pool closes last. The wait is bounded by a submission's own bound.
	shutdownCtx, cancelShutdown := context.WithTimeout(context.Background(), svc.SubmissionBound()+5*time.Second)
	defer cancelShutdown()
	shutdownErr := httpSrv.Shutdown(shutdownCtx)
	if err := svc.Drain(shutdownCtx); err != nil {
		logger.Error("stopping with submissions in flight", "err", err)
		shutdownErr = errors.Join(shutdownErr, err)
	}
	stopBG()
	<-workerDone
	if serveErr != nil {
		return serveErr
	}
	return shutdownErr
}

func requireMigrated(dbURL string) error {
	return migrator.RequireLatest("gongbu", dbURL, gongbusql.Migrations())
}

func reconcileCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("reconcile", stderr)
	hubuURL := fs.String("hubu-url", getenv("GONGBU_HUBU_URL"), "Hubu's base URL (env GONGBU_HUBU_URL)")
	hubuToken := fs.String("hubu-token", getenv("GONGBU_HUBU_TOKEN"), "a Hubu service token (env GONGBU_HUBU_TOKEN)")
	gongbuURL := fs.String("gongbu-url", getenv("GONGBU_URL"), "Gongbu's base URL (env GONGBU_URL)")
	serviceToken := fs.String("service-token", getenv("GONGBU_SERVICE_TOKEN"), "the token Gongbu accepts from Hubu (env GONGBU_SERVICE_TOKEN)")
	fluxURL := fs.String("flux-url", getenv("GONGBU_FLUX_URL"), "mockflux's base URL, whose charge ledger is compared (env GONGBU_FLUX_URL)")
	requireFinal := fs.Bool("require-final", false, "fail while any operation is still in flight (to close the books, or at the end of a test)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, f := range []struct{ name, value string }{{"hubu-url", *hubuURL}, {"gongbu-url", *gongbuURL}, {"flux-url", *fluxURL}} {
		if err := requireHTTPURL(f.name, f.value); err != nil {
			return err
		}
	}
	if *hubuToken == "" || *serviceToken == "" {
		return errors.New("--hubu-token and --service-token are required")
	}
	src, err := reconcile.NewSources(*hubuURL, *hubuToken, *gongbuURL, *serviceToken, *fluxURL, &http.Client{Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	report, err := reconcile.Run(ctx, src)
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	fmt.Fprint(stdout, report.String())
	if len(report.Mismatches) > 0 {
		return fmt.Errorf("%d mismatches", len(report.Mismatches))
	}
	if *requireFinal && len(report.InFlight) > 0 {
		return fmt.Errorf("%d operations still in flight", len(report.InFlight))
	}
	return nil
}

func resolveCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("resolve", stderr)
	dbURL := fs.String("database-url", getenv("GONGBU_DATABASE_URL"), "PostgreSQL URL (env GONGBU_DATABASE_URL)")
	decision := fs.String("decision", "", "the decision id of the indeterminate execution")
	charged := fs.Int64("charged-micros", 0, "what the provider charged for it, in micro-units (more than 0, at most the authorized amount)")
	notCharged := fs.Bool("not-charged", false, "the provider charged nothing for it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := requireDatabaseURL(*dbURL); err != nil {
		return err
	}
	id, err := uuid.Parse(*decision)
	if err != nil {
		return errors.New("--decision must be a decision id (a UUID)")
	}
	chargedSet := false
	fs.Visit(func(f *flag.Flag) { chargedSet = chargedSet || f.Name == "charged-micros" })
	switch {
	case chargedSet == *notCharged:
		return errors.New("give exactly one of --charged-micros N and --not-charged")
	case chargedSet && *charged <= 0:
		return errors.New("--charged-micros must be more than 0; use --not-charged when the provider charged nothing")
	}

	store, closeStore, err := openStore(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer closeStore()
	x, err := store.Resolve(ctx, id, *charged, time.Now())
	if err != nil {
		if code := gongbu.ErrorCode(err); code != gongbu.CodeInternal {
			return errors.New(gongbu.ErrorMessage(err))
		}
		return err
	}
	if x.State == gongbu.StateSucceeded {
		fmt.Fprintf(stdout, "decision %s resolved: succeeded, the provider charged %d micros; a running gongbu settles it with Hubu (capture %d, release the rest)\n",
			id, *x.ChargedMicros, *x.ChargedMicros)
		return nil
	}
	fmt.Fprintf(stdout, "decision %s resolved: failed, nothing charged; a running gongbu has Hubu release its hold\n", id)
	return nil
}

// renewEpochCmd starts a new epoch of Gongbu's database: run it after restoring the database
// from a backup, before Gongbu serves again. The restored database may lack executions it
// accepted after the backup was taken; from now on, a decision issued before the new epoch
// that it has no record of is treated as possibly submitted (never submitted blindly).
func renewEpochCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("renew-epoch", stderr)
	dbURL := fs.String("database-url", getenv("GONGBU_DATABASE_URL"), "PostgreSQL URL (env GONGBU_DATABASE_URL)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := requireDatabaseURL(*dbURL); err != nil {
		return err
	}
	store, closeStore, err := openStore(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer closeStore()
	ep, err := store.RenewEpoch(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "database epoch %s began at %s: decisions issued before it that this database has no record of are treated as possibly submitted\n",
		ep.ID, ep.BeganAt.UTC().Format(time.RFC3339Nano))
	return nil
}

// openStore opens Gongbu's database for a one-off command and checks that it answers and is
// migrated.
func openStore(ctx context.Context, dbURL string) (*postgres.Store, func(), error) {
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return nil, nil, errors.New("--database-url is not a valid PostgreSQL URL")
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("cannot reach the database: %v", err)
	}
	if err := requireMigrated(dbURL); err != nil {
		pool.Close()
		return nil, nil, err
	}
	return postgres.NewStore(pool), pool.Close, nil
}
