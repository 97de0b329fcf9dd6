// Command hubu is the Hubu authorization service: `hubu serve`, `hubu migrate up|down|version`,
// `hubu operator create` and `hubu service create`.
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
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"hubu.dev/hubu/kit/failpoint"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/console"
	"hubu.dev/hubu/services/hubu/gongbuexec"
	"hubu.dev/hubu/services/hubu/httpserver"
	"hubu.dev/hubu/services/hubu/lifecycle"
	"hubu.dev/hubu/services/hubu/postgres"
	hubusql "hubu.dev/hubu/sql/hubu"
	"hubu.dev/hubu/sql/migrator"
)

const usage = `usage:
  hubu serve --listen ADDR --database-url URL [--approval-ttl 24h] [--gongbu-url URL --gongbu-token TOKEN]
  hubu migrate up|down|version --database-url URL
  hubu operator create --name NAME --database-url URL
  hubu service create --name NAME --database-url URL
Settings fall back to HUBU_LISTEN, HUBU_DATABASE_URL, HUBU_APPROVAL_TTL, HUBU_GONGBU_URL
and HUBU_GONGBU_TOKEN. hubu serve also serves the approval console at /console (sign in
with an operator token).`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	default:
		// One line, whatever a dependency put in its message.
		fmt.Fprintln(os.Stderr, "hubu:", strings.Join(strings.Fields(err.Error()), " "))
		os.Exit(2)
	}
}

// run is the whole program; tests and the e2e harness call it in-process.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return errors.New("missing command")
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		return serve(ctx, rest, getenv, stderr)
	case "migrate":
		return migrator.Command("hubu", "HUBU_DATABASE_URL", hubusql.Migrations(), rest, getenv, stdout, stderr)
	case "operator", "service":
		return createCredential(ctx, cmd, rest, getenv, stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return nil
	default:
		fmt.Fprintln(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("hubu "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func databaseURLFlag(fs *flag.FlagSet, getenv func(string) string) *string {
	return fs.String("database-url", getenv("HUBU_DATABASE_URL"), "PostgreSQL URL (env HUBU_DATABASE_URL)")
}

func requireDatabaseURL(u string) error { return migrator.CheckURL(u, "HUBU_DATABASE_URL") }

func serve(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	listen := fs.String("listen", envOr(getenv, "HUBU_LISTEN", "127.0.0.1:8081"), "address to listen on; port 0 picks one (env HUBU_LISTEN)")
	dbURL := databaseURLFlag(fs, getenv)
	ttlDefault := envOr(getenv, "HUBU_APPROVAL_TTL", "24h")
	ttlText := fs.String("approval-ttl", ttlDefault, "how long a held operation waits for approval (env HUBU_APPROVAL_TTL)")
	retryDefault := 10 * time.Second
	if v := getenv("HUBU_RETRY_AFTER"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			retryDefault = d
		}
	}
	retryAfter := fs.Duration("retry-after", retryDefault, "re-send a decision the executor has not acknowledged after this long (env HUBU_RETRY_AFTER)")
	gongbuURL := fs.String("gongbu-url", getenv("HUBU_GONGBU_URL"), "Gongbu's base URL; without it decisions wait in dispatching (env HUBU_GONGBU_URL)")
	gongbuToken := fs.String("gongbu-token", getenv("HUBU_GONGBU_TOKEN"), "the service token Gongbu accepts from Hubu (env HUBU_GONGBU_TOKEN)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := requireDatabaseURL(*dbURL); err != nil {
		return err
	}
	var executor hubu.Executor
	if *gongbuURL != "" {
		if *gongbuToken == "" {
			return errors.New("--gongbu-token (or HUBU_GONGBU_TOKEN) is required with --gongbu-url")
		}
		if u, err := url.Parse(*gongbuURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errors.New("--gongbu-url must be an http(s) URL")
		}
		gx, err := gongbuexec.New(*gongbuURL, *gongbuToken, &http.Client{Timeout: 30 * time.Second})
		if err != nil {
			return fmt.Errorf("--gongbu-url: %v", err)
		}
		executor = gx
	}
	if *retryAfter <= 0 {
		return errors.New("--retry-after must be positive")
	}
	ttl, err := time.ParseDuration(*ttlText)
	if err != nil || ttl <= 0 {
		return fmt.Errorf("--approval-ttl %q is not a positive duration such as 24h", *ttlText)
	}
	logger := slog.New(slog.NewJSONHandler(stderr, nil)).With("service", "hubu")

	pool, err := pgxpool.New(ctx, *dbURL)
	if err != nil {
		return errors.New("--database-url is not a valid PostgreSQL URL")
	}
	defer pool.Close()
	startCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(startCtx); err != nil {
		return fmt.Errorf("cannot reach the database: %v", pgErrorSummary(err))
	}
	if err := migrator.RequireLatest("hubu", *dbURL, hubusql.Migrations()); err != nil {
		return err
	}

	now := failpoint.Clock()
	store := postgres.NewStore(pool, ttl)
	life := &lifecycle.Service{Store: store, Executor: executor, Logger: logger, Now: now, RetryAfter: *retryAfter}
	srv := &httpserver.Server{Store: store, Lifecycle: life, Logger: logger, Now: now,
		Console: console.New(store, &console.Options{Logger: logger, Now: now})}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %v", *listen, err)
	}
	httpSrv := &http.Server{Handler: srv.Handler(reg), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 2 * time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	logger.Info("listening", "addr", ln.Addr().String())

	bg, stopBG := context.WithCancel(ctx)
	defer stopBG()
	go life.Run(bg, min(5*time.Second, *retryAfter))

	errc := make(chan error, 1)
	go func() { errc <- httpSrv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutdownCtx, cancelShutdown := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancelShutdown()
	if err := httpSrv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

func createCredential(ctx context.Context, kind string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "create" {
		return fmt.Errorf("usage: hubu %s create --name NAME --database-url URL", kind)
	}
	fs := newFlags(kind+" create", stderr)
	name := fs.String("name", "", "who the token is for")
	dbURL := databaseURLFlag(fs, getenv)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if err := requireDatabaseURL(*dbURL); err != nil {
		return err
	}
	if *name == "" {
		return errors.New("--name is required")
	}
	pool, err := pgxpool.New(ctx, *dbURL)
	if err != nil {
		return errors.New("--database-url is not a valid PostgreSQL URL")
	}
	defer pool.Close()
	role := map[string]hubu.Role{"operator": hubu.RoleOperator, "service": hubu.RoleService}[kind]
	token, err := postgres.NewStore(pool, 0).CreateCredential(ctx, role, *name, time.Now())
	if err != nil {
		return fmt.Errorf("create %s credential: %v", kind, pgErrorSummary(err))
	}
	fmt.Fprintln(stdout, token) // shown once; Hubu keeps only its hash
	return nil
}

func envOr(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}

// pgErrorSummary keeps connection errors to one line without echoing the URL.
func pgErrorSummary(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 && strings.Contains(msg, "failed to connect") {
		return "failed to connect: " + msg[i+2:]
	}
	return msg
}
