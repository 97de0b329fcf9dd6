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
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/router/identity"
	"hubu.dev/hubu/router/mcpserver"
	"hubu.dev/hubu/router/registry"
)

const version = "1.0.0"

const usage = `usage:
  hubu-unified-mcp --hubu-url URL --gongbu-url URL [--state FILE] [--http ADDR] [--diagnose-meta[=FILE]]
                   [--identity-config FILE] [--preallocated-keys FILE] [--wait 30s] [--allow-private-image-hosts]
  hubu-unified-mcp preallocate --file FILE --count N
  hubu-unified-mcp installation-id [--state FILE]
  hubu-unified-mcp support-matrix FILE...
The agent's token comes from HUBU_AGENT_TOKEN; with --http, clients must present ROUTER_MCP_TOKEN.
Flags fall back to HUBU_URL, GONGBU_URL, ROUTER_STATE, ROUTER_HTTP, ROUTER_DIAGNOSE_META,
ROUTER_IDENTITY_CONFIG, ROUTER_PREALLOCATED_KEYS, ROUTER_WAIT and ROUTER_ALLOW_PRIVATE_IMAGE_HOSTS.
Without --http the router speaks stdio.`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "hubu-unified-mcp:", strings.Join(strings.Fields(err.Error()), " "))
		os.Exit(2)
	}
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
	if len(args) > 0 && args[0] == "installation-id" {
		return installationID(ctx, args[1:], getenv, stdout, stderr)
	}
	fs := flag.NewFlagSet("hubu-unified-mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, usage); fs.PrintDefaults() }
	hubuURL := fs.String("hubu-url", getenv("HUBU_URL"), "Hubu's base URL (env HUBU_URL)")
	gongbuURL := fs.String("gongbu-url", getenv("GONGBU_URL"), "Gongbu's base URL (env GONGBU_URL)")
	state := fs.String("state", getenv("ROUTER_STATE"), "the registry file (env ROUTER_STATE; default: $XDG_STATE_HOME/hubu/router.db)")
	httpAddr := fs.String("http", getenv("ROUTER_HTTP"), "serve streamable HTTP on ADDR instead of stdio (env ROUTER_HTTP)")
	diag := &diagnoseFlag{}
	switch v := getenv("ROUTER_DIAGNOSE_META"); strings.ToLower(v) {
	case "", "0", "false", "no":
	case "1", "true", "yes":
		_ = diag.Set("true")
	default:
		_ = diag.Set(v)
	}
	fs.Var(diag, "diagnose-meta", "log the shape of each call's _meta (never values) to stderr, or to FILE")
	identityConfig := fs.String("identity-config", getenv("ROUTER_IDENTITY_CONFIG"), "accepted envelope platforms and their keys (env ROUTER_IDENTITY_CONFIG)")
	preallocated := fs.String("preallocated-keys", getenv("ROUTER_PREALLOCATED_KEYS"), "claim operation keys from this file; only Codex calls may start operations (env ROUTER_PREALLOCATED_KEYS)")
	waitDefault := 30 * time.Second
	if v := getenv("ROUTER_WAIT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("ROUTER_WAIT %q is not a duration such as 30s", v)
		}
		waitDefault = d
	}
	wait := fs.Duration("wait", waitDefault, "how long a spend waits for its image before answering running (env ROUTER_WAIT)")
	allowPrivateImages := false
	if v := getenv("ROUTER_ALLOW_PRIVATE_IMAGE_HOSTS"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("ROUTER_ALLOW_PRIVATE_IMAGE_HOSTS %q is not true or false", v)
		}
		allowPrivateImages = b
	}
	fs.BoolVar(&allowPrivateImages, "allow-private-image-hosts", allowPrivateImages,
		"download result images from loopback, private and link-local addresses too; only for a local stack, "+
			"such as make up's mockflux on 127.0.0.1 (env ROUTER_ALLOW_PRIVATE_IMAGE_HOSTS)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, f := range []struct{ name, value string }{{"hubu-url", *hubuURL}, {"gongbu-url", *gongbuURL}} {
		if err := checkURL(f.name, f.value); err != nil {
			return err
		}
	}
	agentToken := getenv("HUBU_AGENT_TOKEN")
	if agentToken == "" {
		return errors.New("HUBU_AGENT_TOKEN is not set: the router needs the agent's Hubu token")
	}
	mcpToken := getenv("ROUTER_MCP_TOKEN")
	if *httpAddr != "" && mcpToken == "" {
		return errors.New("--http needs ROUTER_MCP_TOKEN: without it anyone who reaches the port could forge _meta")
	}
	if *wait <= 0 {
		return errors.New("--wait must be positive")
	}
	if *state == "" {
		p, err := defaultState(getenv)
		if err != nil {
			return err
		}
		*state = p
	}
	logger := slog.New(slog.NewJSONHandler(stderr, nil)).With("service", "hubu-unified-mcp")

	var idCfg *identity.Config
	if *identityConfig != "" {
		c, err := identity.LoadConfig(*identityConfig)
		if err != nil {
			return fmt.Errorf("--identity-config: %v", err)
		}
		idCfg = c
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
		return fmt.Errorf("--state %s: %v", *state, err)
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
	hc := &http.Client{Timeout: 60 * time.Second}
	auth := func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+agentToken)
		return nil
	}
	hubu, err := hubuapi.NewClientWithResponses(*hubuURL, hubuapi.WithHTTPClient(hc), hubuapi.WithRequestEditorFn(auth))
	if err != nil {
		return err
	}
	gongbu, err := gongbuapi.NewClientWithResponses(*gongbuURL, gongbuapi.WithHTTPClient(hc), gongbuapi.WithRequestEditorFn(auth))
	if err != nil {
		return err
	}
	router := mcpserver.New(mcpserver.Config{
		Registry: reg, Hubu: hubu, Gongbu: gongbu, Identity: idCfg, Logger: logger, Diagnose: diagOut, Wait: *wait,
		AllowPrivateImageHosts: allowPrivateImages,
	})
	server := router.Server(version)
	logger.Info("router ready", "installation_id", reg.InstallationID(), "transport", map[bool]string{true: "http", false: "stdio"}[*httpAddr != ""],
		"allow_private_image_hosts", allowPrivateImages)

	if *httpAddr == "" {
		err := server.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}})
		if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
			return err
		}
		return nil
	}
	return serveHTTP(ctx, *httpAddr, mcpToken, server, logger)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// serveHTTP serves streamable HTTP at /mcp; every request must carry the router's token.
func serveHTTP(ctx context.Context, addr, token string, server *mcp.Server, logger *slog.Logger) error {
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	want := sha256.Sum256([]byte(token))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	})
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
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %v", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("listening", "addr", ln.Addr().String(), "path", "/mcp")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}

func checkURL(name, v string) error {
	if v == "" {
		return fmt.Errorf("--%s is required", name)
	}
	if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--%s must be an http(s) URL", name)
	}
	return nil
}

// defaultState is the registry in the user's state directory (XDG).
func defaultState(getenv func(string) string) (string, error) {
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
		batch[i] = "hubu:operation:v1:codex:" + uuid.NewString()
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
