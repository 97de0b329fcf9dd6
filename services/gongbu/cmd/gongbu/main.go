// Command gongbu is the Gongbu executor: `gongbu serve`, `gongbu migrate up|down|version`,
// `gongbu reconcile` and `gongbu resolve`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"hubu.dev/hubu/kit/command"
	"hubu.dev/hubu/kit/failpoint"
	"hubu.dev/hubu/kit/httpjson"
	"hubu.dev/hubu/kit/metrics"
	"hubu.dev/hubu/kit/pglisten"
	"hubu.dev/hubu/kit/pgstart"
	"hubu.dev/hubu/kit/tracing"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/changefeed"
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
               --flux-key KEY [--flux-url https://api.bfl.ai] [--flux-idempotent] [--flux-timeout 60s]
               [--flux-polling-hosts HOST,...] [--flux-sample-hosts HOST,...]
               [--poll-interval 1s] [--first-poll 10ms] [--poll-deadline 10m] [--lease DURATION]
               [--webhook-url URL --webhook-key KEY] [--metrics-listen ADDR] [--metrics-refresh 15s]
  gongbu migrate up|down|version --database-url URL
  gongbu reconcile --hubu-url URL --hubu-token TOKEN --gongbu-url URL --service-token TOKEN --flux-key KEY
                   [--flux-url https://api.bfl.ai] [--since 24h] [--stale 30m] [--mock-ledger URL] [--require-final]
  gongbu resolve --database-url URL --decision ID (--charged-micros N | --not-charged | --job-id JOB [--polling-url URL] [--poll-deadline 10m])
  gongbu renew-epoch --database-url URL   (after restoring the database from a backup)
  gongbu prune-images --database-url URL --older-than DURATION [--dry-run]   (at least 24h)
Settings fall back to GONGBU_LISTEN, GONGBU_DATABASE_URL, GONGBU_HUBU_URL, GONGBU_HUBU_TOKEN,
GONGBU_SERVICE_TOKEN, GONGBU_FLUX_URL, GONGBU_FLUX_KEY, GONGBU_FLUX_IDEMPOTENT, GONGBU_FLUX_TIMEOUT,
GONGBU_FLUX_POLLING_HOSTS, GONGBU_FLUX_SAMPLE_HOSTS, GONGBU_POLL_INTERVAL, GONGBU_FIRST_POLL, GONGBU_POLL_DEADLINE,
GONGBU_LEASE, GONGBU_WEBHOOK_URL, GONGBU_WEBHOOK_KEY, GONGBU_METRICS_LISTEN, GONGBU_METRICS_REFRESH and GONGBU_URL. The secrets (GONGBU_DATABASE_URL,
GONGBU_HUBU_TOKEN, GONGBU_SERVICE_TOKEN, GONGBU_FLUX_KEY, GONGBU_WEBHOOK_KEY) may instead be in a file named by the variable with _FILE
appended, such as GONGBU_FLUX_KEY_FILE.`

func main() { command.Main("gongbu", run) }

// run is the whole program; tests and the e2e harness call it in-process. Its error is one line.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return command.OneLine(command.Dispatch(args, usage, stdout, stderr, command.Commands{
		"serve": func(rest []string) error { return serve(ctx, rest, getenv, stderr) },
		"migrate": func(rest []string) error {
			getenv, err := command.WithSecret(getenv, "GONGBU_DATABASE_URL")
			if err != nil {
				return err
			}
			return migrator.Command("gongbu", "GONGBU_DATABASE_URL", gongbusql.Migrations(), rest, getenv, stdout, stderr)
		},
		"reconcile":    func(rest []string) error { return reconcileCmd(ctx, rest, getenv, stdout, stderr) },
		"resolve":      func(rest []string) error { return resolveCmd(ctx, rest, getenv, stdout, stderr) },
		"renew-epoch":  func(rest []string) error { return renewEpochCmd(ctx, rest, getenv, stdout, stderr) },
		"prune-images": func(rest []string) error { return pruneImagesCmd(ctx, rest, getenv, stdout, stderr) },
	}))
}

func databaseURLFlag(fs *command.FlagSet) *string {
	return fs.Secret("database-url", "GONGBU_DATABASE_URL", "PostgreSQL URL")
}

func requireDatabaseURL(u string) error { return migrator.CheckURL(u, "GONGBU_DATABASE_URL") }

func serve(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := command.NewFlagSet("gongbu serve", getenv, stderr)
	listen := fs.String("listen", "GONGBU_LISTEN", "127.0.0.1:8082", "address to listen on; port 0 picks one")
	dbURL := databaseURLFlag(fs)
	hubuURL := fs.String("hubu-url", "GONGBU_HUBU_URL", "", "Hubu's base URL")
	hubuToken := fs.Secret("hubu-token", "GONGBU_HUBU_TOKEN", "a Hubu service token, from hubu service create")
	serviceToken := fs.Secret("service-token", "GONGBU_SERVICE_TOKEN", "the token Hubu presents to Gongbu")
	fluxURL := fs.String("flux-url", "GONGBU_FLUX_URL", "https://api.bfl.ai", "the FLUX API's base URL (BFL's global one, or api.eu.bfl.ai or api.us.bfl.ai), or mockflux's")
	fluxKey := fs.Secret("flux-key", "GONGBU_FLUX_KEY", "the FLUX API key")
	fluxIdempotent := fs.Bool("flux-idempotent", "GONGBU_FLUX_IDEMPOTENT", false, "the FLUX endpoint honours Idempotency-Key (mockflux does; the real API documents none)")
	lease := fs.Duration("lease", "GONGBU_LEASE", 0, "how long a worker owns an open execution, by default longer than any submission. "+
		"Shorter than a submission lets another worker take a live one over: with a provider that ignores keys it then becomes indeterminate")
	fluxTimeout := fs.Duration("flux-timeout", "GONGBU_FLUX_TIMEOUT", 60*time.Second, "how long one request to the FLUX API may take")
	pollingHosts := fs.String("flux-polling-hosts", "GONGBU_FLUX_POLLING_HOSTS", "",
		"comma-separated hosts (host or host:port, exact) besides --flux-url's whose polling URLs Gongbu follows, sending them the FLUX key; "+
			"with BFL's API as --flux-url, its API hosts (api.bfl.ai, api.<region>.bfl.ai, HTTPS) are followed without being listed. Any other polling URL is refused")
	sampleHosts := fs.String("flux-sample-hosts", "GONGBU_FLUX_SAMPLE_HOSTS", "",
		"an allow-list: comma-separated hosts (host or host:port, exact) besides --flux-url's that a result's image URL may be on, downloaded whatever "+
			"address they resolve to. Empty: any HTTPS host, downloaded only from a public address (BFL moves its delivery hosts)")
	pollInterval := fs.Duration("poll-interval", "GONGBU_POLL_INTERVAL", time.Second, "how often the background pass runs and polls each open job")
	firstPoll := fs.Duration("first-poll", "GONGBU_FIRST_POLL", execution.DefaultFirstPoll,
		"Gongbu looks at a job right after submitting it, again after this long, and then after twice as long each time until the wait reaches --poll-interval")
	webhookURL := fs.String("webhook-url", "GONGBU_WEBHOOK_URL", "",
		"this Gongbu's /v1/webhooks/bfl URL as the provider reaches it; sent with every submission so the provider says when a job is done "+
			"(Gongbu then polls it at once). Empty: Gongbu only polls")
	webhookKey := fs.Secret("webhook-key", "GONGBU_WEBHOOK_KEY", "at least 32 bytes, the same in every replica: derives each job's webhook secret (required with --webhook-url)")
	pollDeadline := fs.Duration("poll-deadline", "GONGBU_POLL_DEADLINE", 10*time.Minute, "how long a job may stay pending before it is indeterminate")
	metricsListen := fs.String("metrics-listen", "GONGBU_METRICS_LISTEN", "",
		"address to serve /metrics on, alone, instead of on --listen (which then serves no /metrics); port 0 picks one")
	metricsRefresh := fs.Duration("metrics-refresh", "GONGBU_METRICS_REFRESH", metrics.DefaultRefresh,
		"the longest the state gauges of one database read are served; a scrape after that reads them again")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := requireDatabaseURL(*dbURL); err != nil {
		return err
	}
	for _, f := range []struct{ name, value string }{{"hubu-url", *hubuURL}, {"flux-url", *fluxURL}} {
		if err := command.RequireHTTPURL(f.name, f.value); err != nil {
			return err
		}
	}
	for _, f := range []struct{ name, value string }{{"hubu-token", *hubuToken}, {"service-token", *serviceToken}, {"flux-key", *fluxKey}} {
		if f.value == "" {
			return fmt.Errorf("--%s is required", f.name)
		}
	}
	if *pollInterval <= 0 || *pollDeadline <= 0 || *firstPoll <= 0 {
		return errors.New("--poll-interval, --poll-deadline and --first-poll must be positive")
	}
	if *webhookURL != "" {
		if err := command.RequireHTTPURL("webhook-url", *webhookURL); err != nil {
			return err
		}
		if len(*webhookKey) < 32 {
			return errors.New("--webhook-url needs --webhook-key (or GONGBU_WEBHOOK_KEY) of at least 32 bytes")
		}
	}
	if *lease < 0 {
		return errors.New("--lease must not be negative")
	}
	if *metricsRefresh <= 0 {
		return errors.New("--metrics-refresh must be positive")
	}
	if *fluxTimeout <= 0 || *fluxTimeout > 10*time.Minute {
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
	logger := command.NewLogger(stderr, "gongbu")
	stopTracing, err := command.StartTracing(ctx, "gongbu", logger)
	if err != nil {
		return fmt.Errorf("tracing: %v", err)
	}
	defer stopTracing()

	store, pool, err := openStore(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	hc := &http.Client{Transport: httpjson.Timeout(tracing.Transport(httpjson.PooledTransport(), "hubu"), 60*time.Second)}
	authority, err := hubulink.New(*hubuURL, *hubuToken, hc)
	if err != nil {
		return err
	}
	adapter, err := flux.NewAdapter(flux.Config{BaseURL: *fluxURL, APIKey: *fluxKey, HonoursIdempotency: *fluxIdempotent, Timeout: *fluxTimeout,
		PollingHosts: fluxPolling, SampleHosts: fluxSamples, WebhookURL: *webhookURL, WebhookKey: []byte(*webhookKey)})
	if err != nil {
		return err
	}
	now := failpoint.Clock()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		metrics.NewBuildInfo("gongbu"), metrics.NewPoolCollector("gongbu", pool),
		execution.NewExecutionsCollector(pool, &metrics.QueryOptions{Refresh: *metricsRefresh, Now: now, Logger: logger}))
	execMetrics := execution.NewMetrics(reg)
	svc := &execution.Service{
		Store: store, Providers: map[string]gongbu.Provider{adapter.Name(): execMetrics.Timed(adapter)}, Authority: authority, Metrics: execMetrics,
		Logger: logger, Now: now, PollInterval: *pollInterval, FirstPoll: *firstPoll, PollDeadline: *pollDeadline, CallTimeout: *fluxTimeout,
	}
	// A worker's lease outlasts any submission it makes, so no other worker takes a live
	// submission over. --lease may shorten it (the e2e suite does, against mockflux).
	svc.Lease = svc.SubmissionBound() + 30*time.Second
	if *lease > 0 {
		svc.Lease = *lease
	}
	// Every replica hears of every execution's change through Postgres, and wakes the
	// requests waiting for it; a gap in the listener wakes them all to read again.
	changes := &changefeed.Feed{}
	listener := pglisten.New(*dbURL, logger)
	listener.Handle(changefeed.Channel, changes.Notify)
	listener.OnGap(changes.NotifyAll)
	srv := &httpserver.Server{Executions: svc, Authority: authority, ServiceToken: *serviceToken, Logger: logger, Ping: store.Ping, Changes: changes}
	if *webhookURL != "" {
		srv.Webhooks = map[string]httpserver.Webhook{adapter.Name(): adapter}
	}

	ln, err := command.Listen(*listen)
	if err != nil {
		return err
	}
	// With a metrics listener, the API's serves no /metrics: who reaches Gongbu's API cannot
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
	httpSrv := command.NewHTTPServer(tracing.Handler(srv.Handler(apiReg)))
	// An execution answers once Hubu has confirmed the decision and the provider answered.
	httpSrv.WriteTimeout = time.Minute + svc.SubmissionBound()
	logger.Info("listening", append(addrs, "flux_idempotent", *fluxIdempotent,
		"flux_polling_hosts", fluxPolling, "flux_sample_hosts", fluxSamples, "webhook", *webhookURL != "")...)

	bg, stopBG := context.WithCancel(ctx)
	workerDone := make(chan struct{})
	go func() {
		defer close(workerDone)
		svc.Run(bg, *pollInterval)
	}()
	listenerDone := make(chan struct{})
	go func() {
		defer close(listenerDone)
		listener.Run(bg)
	}()
	// Nothing that calls the provider may outlive the pool: a charged job whose answer is not
	// recorded is lost to Gongbu. So the HTTP server stops first, waiting for its requests,
	// then the submissions they started (tracked by the service, in case a request ended
	// before its submission did), then the background worker (its submissions outlive the
	// cancellation); the pool closes last. The wait is bounded by a submission's own bound.
	return metrics.ServeAlongside(ctx, metricsLn, reg, logger, func(ctx context.Context) error {
		return command.Serve(ctx, httpSrv, ln, logger, svc.SubmissionBound()+5*time.Second, func(ctx context.Context) error {
			err := svc.Drain(ctx)
			if err != nil {
				logger.Error("stopping with submissions in flight", "err", err)
			}
			stopBG()
			<-workerDone
			<-listenerDone
			return err
		})
	})
}

func reconcileCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := command.NewFlagSet("gongbu reconcile", getenv, stderr)
	hubuURL := fs.String("hubu-url", "GONGBU_HUBU_URL", "", "Hubu's base URL")
	hubuToken := fs.Secret("hubu-token", "GONGBU_HUBU_TOKEN", "a Hubu service token")
	gongbuURL := fs.String("gongbu-url", "GONGBU_URL", "", "Gongbu's base URL")
	serviceToken := fs.Secret("service-token", "GONGBU_SERVICE_TOKEN", "the token Gongbu accepts from Hubu")
	fluxURL := fs.String("flux-url", "GONGBU_FLUX_URL", "https://api.bfl.ai", "the FLUX API's base URL, where each execution's job is looked up by its id")
	fluxKey := fs.Secret("flux-key", "GONGBU_FLUX_KEY", "the FLUX API key")
	pollingHosts := fs.String("flux-polling-hosts", "GONGBU_FLUX_POLLING_HOSTS", "", "as for gongbu serve: hosts besides --flux-url's whose polling URLs are followed")
	since := fs.Duration("since", "", 24*time.Hour, "look up at the provider the jobs of final executions changed within this (0: all); jobs not final are always looked up")
	stale := fs.Duration("stale", "", 30*time.Minute, "an operation in flight for longer than this is a mismatch (0: never)")
	mockLedger := fs.String("mock-ledger", "", "", "mockflux's base URL: compare its charge ledger too (the real API has none)")
	requireFinal := fs.Bool("require-final", "", false, "fail while any operation is still in flight (to close the books, or at the end of a test)")
	if err := fs.ParseNoArgs(args); err != nil {
		return err
	}
	for _, f := range []struct{ name, value string }{{"hubu-url", *hubuURL}, {"gongbu-url", *gongbuURL}, {"flux-url", *fluxURL}} {
		if err := command.RequireHTTPURL(f.name, f.value); err != nil {
			return err
		}
	}
	if *mockLedger != "" {
		if err := command.RequireHTTPURL("mock-ledger", *mockLedger); err != nil {
			return err
		}
	}
	if *hubuToken == "" || *serviceToken == "" || *fluxKey == "" {
		return errors.New("--hubu-token, --service-token and --flux-key are required")
	}
	if *since < 0 || *stale < 0 {
		return errors.New("--since and --stale must not be negative")
	}
	fluxPolling, err := flux.ParseHosts(*pollingHosts)
	if err != nil {
		return fmt.Errorf("--flux-polling-hosts: %v", err)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	records, err := reconcile.NewRecords(*hubuURL, *hubuToken, *gongbuURL, *serviceToken, hc)
	if err != nil {
		return err
	}
	provider, err := flux.NewAdapter(flux.Config{BaseURL: *fluxURL, APIKey: *fluxKey, Timeout: 30 * time.Second, PollingHosts: fluxPolling})
	if err != nil {
		return err
	}
	opts := reconcile.Options{Provider: provider, Since: *since, Stale: *stale}
	if *mockLedger != "" {
		if opts.Ledger, err = reconcile.NewMockLedger(*mockLedger, hc); err != nil {
			return err
		}
	}
	report, err := reconcile.Run(ctx, records, opts)
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
	fs := command.NewFlagSet("gongbu resolve", getenv, stderr)
	dbURL := databaseURLFlag(fs)
	decision := fs.String("decision", "", "", "the decision id of the indeterminate execution")
	charged := fs.Int64("charged-micros", 0, "what the provider charged for it, in micro-units (more than 0, at most the authorized amount)")
	fs.Bool("not-charged", "", false, "the provider charged nothing for it")
	jobID := fs.String("job-id", "", "", "the provider's job for it, from the log line \"could not record a submitted job\": Gongbu polls it again")
	pollingURL := fs.String("polling-url", "", "", "with --job-id: the job's polling URL from the same log line (without it, the job is polled at the API's base URL)")
	pollDeadline := fs.Duration("poll-deadline", "", 10*time.Minute, "with --job-id: how long the job may stay pending before it is indeterminate again")
	if err := fs.ParseNoArgs(args); err != nil {
		return err
	}
	if err := requireDatabaseURL(*dbURL); err != nil {
		return err
	}
	id, err := uuid.Parse(*decision)
	if err != nil {
		return errors.New("--decision must be a decision id (a UUID)")
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	verdicts := 0
	for _, v := range []string{"charged-micros", "not-charged", "job-id"} {
		if given[v] {
			verdicts++
		}
	}
	switch {
	case verdicts != 1:
		return errors.New("give exactly one of --charged-micros N, --not-charged and --job-id JOB")
	case given["charged-micros"] && *charged <= 0:
		return errors.New("--charged-micros must be more than 0; use --not-charged when the provider charged nothing")
	case (given["polling-url"] || given["poll-deadline"]) && !given["job-id"]:
		return errors.New("--polling-url and --poll-deadline go with --job-id")
	case given["job-id"] && strings.TrimSpace(*jobID) == "":
		return errors.New("--job-id must not be empty")
	case given["poll-deadline"] && *pollDeadline <= 0:
		return errors.New("--poll-deadline must be positive")
	}
	if given["polling-url"] {
		if err := command.RequireHTTPURL("polling-url", *pollingURL); err != nil {
			return err
		}
	}

	store, pool, err := openStore(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if given["job-id"] {
		now := time.Now()
		x, err := store.ResumeJob(ctx, id, gongbu.Job{ID: *jobID, PollingURL: *pollingURL}, now.Add(*pollDeadline), now)
		if err != nil {
			return resolveError(err)
		}
		fmt.Fprintf(stdout, "decision %s resolved: submitted as job %s; a running gongbu polls it and settles it with Hubu\n", id, *x.ProviderJobID)
		return nil
	}
	x, err := store.Resolve(ctx, id, *charged, time.Now())
	if err != nil {
		return resolveError(err)
	}
	if x.State == gongbu.StateSucceeded {
		fmt.Fprintf(stdout, "decision %s resolved: succeeded, the provider charged %d micros; a running gongbu settles it with Hubu (capture %d, release the rest)\n",
			id, *x.ChargedMicros, *x.ChargedMicros)
		return nil
	}
	fmt.Fprintf(stdout, "decision %s resolved: failed, nothing charged; a running gongbu has Hubu release its hold\n", id)
	return nil
}

// resolveError is a refused verdict in one line: the store's message for the operator's
// mistakes, the error itself otherwise.
func resolveError(err error) error {
	if code := gongbu.ErrorCode(err); code != gongbu.CodeInternal {
		return errors.New(gongbu.ErrorMessage(err))
	}
	return err
}

// renewEpochCmd starts a new epoch of Gongbu's database: run it after restoring the database
// from a backup, before Gongbu serves again. The restored database may lack executions it
// accepted after the backup was taken; from now on, a decision issued before the new epoch
// that it has no record of is treated as possibly submitted (never submitted blindly).
func renewEpochCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := command.NewFlagSet("gongbu renew-epoch", getenv, stderr)
	dbURL := databaseURLFlag(fs)
	if err := fs.ParseNoArgs(args); err != nil {
		return err
	}
	if err := requireDatabaseURL(*dbURL); err != nil {
		return err
	}
	store, pool, err := openStore(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	ep, err := store.RenewEpoch(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "database epoch %s began at %s: decisions issued before it that this database has no record of are treated as possibly submitted\n",
		ep.ID, ep.BeganAt.UTC().Format(time.RFC3339Nano))
	return nil
}

// openStore opens Gongbu's database and checks that it answers and is migrated.
func openStore(ctx context.Context, dbURL string) (*postgres.Store, *pgxpool.Pool, error) {
	pool, err := pgstart.Open(ctx, dbURL)
	if err != nil {
		return nil, nil, err
	}
	if err := migrator.RequireLatest("gongbu", dbURL, gongbusql.Migrations()); err != nil {
		pool.Close()
		return nil, nil, err
	}
	return postgres.NewStore(pool), pool, nil
}
