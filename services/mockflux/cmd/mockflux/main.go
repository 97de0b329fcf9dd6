// Command mockflux is a stand-in for the Black Forest Labs FLUX API for local development and
// tests: `mockflux serve`. Besides the API it answers /healthz, /readyz and /metrics.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"hubu.dev/hubu/kit/command"
	"hubu.dev/hubu/kit/tracing"
	"hubu.dev/hubu/services/mockflux"
	"hubu.dev/hubu/services/mockflux/fault"
	"hubu.dev/hubu/services/mockflux/httpserver"
)

const usage = `usage:
  mockflux serve --listen ADDR [--data FILE] [--api-key KEY] [--pending-polls N] [--render-time 0s] [--sample-ttl 10m]
                 [--polling-url URL] [--delivery-url URL] [--credits N] [--concurrency 24] [--honour-idempotency]
                 [--full-size] [--tls-cert FILE --tls-key FILE]
Settings fall back to MOCKFLUX_LISTEN, MOCKFLUX_DATA, MOCKFLUX_API_KEY, MOCKFLUX_PENDING_POLLS,
MOCKFLUX_RENDER_TIME, MOCKFLUX_SAMPLE_TTL, MOCKFLUX_POLLING_URL, MOCKFLUX_DELIVERY_URL, MOCKFLUX_CREDITS,
MOCKFLUX_CONCURRENCY, MOCKFLUX_HONOUR_IDEMPOTENCY, MOCKFLUX_FULL_SIZE, MOCKFLUX_TLS_CERT and MOCKFLUX_TLS_KEY; the API key may
instead be in a file named by MOCKFLUX_API_KEY_FILE. Without an API key any non-empty x-key header is
accepted. Like the real API, mockflux ignores Idempotency-Key unless --honour-idempotency, answers
polling URLs and results on other hosts than the submit's, states each task's cost in credits, and
answers 402 once --credits are spent and 429 beyond --concurrency tasks rendering at once.
A task is Ready once its render time has passed and its pending polls are used up; a submit
with webhook_url and webhook_secret gets a POST carrying the secret when the task has ended.`

func main() { command.Main("mockflux", run) }

// run is the whole program; tests and the e2e harness call it in-process.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return command.Dispatch(args, usage, stdout, stderr, command.Commands{
		"serve": func(rest []string) error { return serve(ctx, rest, getenv, stdout, stderr) },
	})
}

func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := command.NewFlagSet("mockflux serve", getenv, stderr)
	listen := fs.String("listen", "MOCKFLUX_LISTEN", "127.0.0.1:8083", "address to listen on; port 0 picks one")
	data := fs.String("data", "MOCKFLUX_DATA", "", "journal file that keeps jobs and charges across restarts; empty keeps them in memory")
	apiKey := fs.Secret("api-key", "MOCKFLUX_API_KEY", "the only x-key accepted; empty accepts any non-empty key")
	// Text rather than number and duration flags, so that a bad value says what a good one looks like.
	pollsText := fs.String("pending-polls", "MOCKFLUX_PENDING_POLLS", "1", "polls that answer Pending before a task can be Ready")
	renderText := fs.String("render-time", "MOCKFLUX_RENDER_TIME", "0s", "how long a task takes from submit to Ready (and to its webhook), such as 2s")
	ttlText := fs.String("sample-ttl", "MOCKFLUX_SAMPLE_TTL", "10m", "how long a sample URL works after the task is Ready")
	pollingURL := fs.String("polling-url", "MOCKFLUX_POLLING_URL", "",
		"base URL of the polling URLs submits answer, such as https://api.eu2.bfl.ai; empty: the submit's host under its other name (127.0.0.1 and localhost for each other)")
	deliveryURL := fs.String("delivery-url", "MOCKFLUX_DELIVERY_URL", "",
		"base URL of the sample URLs polls answer, such as https://delivery-eu2.bfl.ai; empty: as --polling-url's default")
	creditsText := fs.String("credits", "MOCKFLUX_CREDITS", "0", "the account's credits at start (1 credit = $0.01), less every charge in --data; 0 is no limit")
	concurrencyText := fs.String("concurrency", "MOCKFLUX_CONCURRENCY", "24", "tasks rendering at once before a submit answers 429 (flux-kontext-max a quarter of it, as BFL's 6 of 24); 0 is no limit")
	honour := fs.Bool("honour-idempotency", "MOCKFLUX_HONOUR_IDEMPOTENCY", false, "honour Idempotency-Key like a payment API (the real API documents none)")
	fullSize := fs.Bool("full-size", "MOCKFLUX_FULL_SIZE", false, "render results at the size asked for, as large as real ones (a 1440x1440 PNG is about 6 MiB), instead of small stand-ins")
	tlsCert := fs.String("tls-cert", "MOCKFLUX_TLS_CERT", "", "serve HTTPS with this certificate (PEM), for tests under the real API's host names")
	tlsKey := fs.String("tls-key", "MOCKFLUX_TLS_KEY", "", "the certificate's private key (PEM)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), usage)
		fs.PrintDefaults()
	}
	if err := fs.ParseNoArgs(args); err != nil {
		return err
	}
	if *listen == "" {
		return errors.New("--listen (or MOCKFLUX_LISTEN) must not be empty")
	}
	polls, err := strconv.Atoi(*pollsText)
	if err != nil || polls < 0 {
		return fmt.Errorf("--pending-polls %q is not a whole number of polls (0 or more)", *pollsText)
	}
	renderTime, err := time.ParseDuration(*renderText)
	if err != nil || renderTime < 0 {
		return fmt.Errorf("--render-time %q is not a duration of 0 or more, such as 2s", *renderText)
	}
	ttl, err := time.ParseDuration(*ttlText)
	if err != nil || ttl <= 0 {
		return fmt.Errorf("--sample-ttl %q is not a positive duration such as 10m", *ttlText)
	}
	credits, err := strconv.ParseFloat(*creditsText, 64)
	if err != nil || credits < 0 || credits > 1e12 {
		return fmt.Errorf("--credits %q is not a number of credits (0 or more, such as 500)", *creditsText)
	}
	concurrency, err := strconv.Atoi(*concurrencyText)
	if err != nil || concurrency < 0 {
		return fmt.Errorf("--concurrency %q is not a whole number of tasks (0 or more)", *concurrencyText)
	}
	for _, u := range []struct{ name, value string }{{"polling-url", *pollingURL}, {"delivery-url", *deliveryURL}} {
		if u.value != "" {
			if err := command.RequireHTTPURL(u.name, u.value); err != nil {
				return err
			}
		}
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	logger := command.NewLogger(stderr, "mockflux")
	stopTracing, err := command.StartTracing(ctx, "mockflux", logger)
	if err != nil {
		return fmt.Errorf("tracing: %v", err)
	}
	defer stopTracing()

	provider, err := mockflux.Open(mockflux.Options{DataFile: *data, PendingPolls: polls, RenderTime: renderTime, Now: time.Now,
		HonoursIdempotency: *honour, CreditsMicros: int64(math.Round(credits * 10_000)), Concurrency: concurrency})
	if err != nil {
		return fmt.Errorf("cannot use --data %s: %v", *data, err)
	}
	defer provider.Close()
	charges, _ := provider.Charges()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv := &httpserver.Server{Provider: provider, Faults: &fault.Set{}, APIKey: *apiKey, SampleTTL: ttl, Now: time.Now, Logger: logger, Metrics: reg,
		PollingURL: strings.TrimSuffix(*pollingURL, "/"), DeliveryURL: strings.TrimSuffix(*deliveryURL, "/"), FullSize: *fullSize}
	ln, err := command.Listen(*listen)
	if err != nil {
		return err
	}
	// Handler starts the webhooks still due from the journal, so only once mockflux can serve.
	// Deferred after provider.Close, so it runs first: webhooks stop once the server has
	// stopped (the last submit answered) and before the journal closes; one not yet sent
	// stays due for the next start.
	httpSrv := command.NewHTTPServer(tracing.Handler(srv.Handler()))
	defer srv.Close()
	httpSrv.WriteTimeout = fault.MaxDelay + time.Minute // a slow fault holds its answer that long
	// Requests see the process's context, so a slow fault stops waiting at SIGTERM.
	httpSrv.BaseContext = func(net.Listener) context.Context { return ctx }
	if *tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
		if err != nil {
			return fmt.Errorf("--tls-cert and --tls-key: %v", err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}})
	}
	logger.Info("listening", "addr", ln.Addr().String(), "tls", *tlsCert != "", "data", *data, "charges", len(charges), "api_key_required", *apiKey != "",
		"pending_polls", polls, "render_time", renderTime.String(), "honours_idempotency", *honour, "credits", credits, "concurrency", concurrency)
	return command.Serve(ctx, httpSrv, ln, logger, command.ShutdownGrace, nil)
}
