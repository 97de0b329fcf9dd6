// Package mcpserver is the router's MCP server: the five tools, and for the spend tool the
// whole flow of a call — refuse identity in the arguments, take exactly one trusted identity
// from _meta, hash the intent, resolve it against the registry, forward it under the private
// operation key, scrub the key from the answer, and record the answer once it is final.
package mcpserver

import (
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/router/identity"
	"hubu.dev/hubu/router/registry"
)

// Config wires a Router. Hubu and Gongbu are generated clients that present the agent's token.
type Config struct {
	Registry *registry.Registry
	Hubu     *hubuapi.ClientWithResponses
	Gongbu   *gongbuapi.ClientWithResponses
	// Identity holds the operator's accepted envelope platforms and their keys; nil accepts
	// Codex and Claude Code identities only.
	Identity *identity.Config
	Logger   *slog.Logger
	// Diagnose, when set, receives one JSON line per call with the shape of its _meta.
	Diagnose io.Writer
	// Wait is how long a spend waits for its image before answering "running".
	Wait time.Duration
	// PollEvery is the pause after a look at Gongbu that failed, or that Gongbu answered
	// unchanged without holding it (a look is otherwise held until the execution changes).
	PollEvery time.Duration
	// ImageLimit is the largest image embedded as MCP image content; a larger one is embedded
	// as its preview, and readable in full as the resource hubu://images/<public handle>.
	ImageLimit int64
	// KeptImageWait bounds the fetch of an image Gongbu keeps (a replay's too: a Gongbu that
	// hangs must not hold up an answer the registry has); 0 is 5 s.
	KeptImageWait time.Duration
	// Images fetches generated images (the provider's delivery URLs); nil is ImageClient's,
	// which refuses private addresses unless AllowPrivateImageHosts.
	Images *http.Client
	// AllowPrivateImageHosts lets the default Images client download from loopback, private
	// and link-local addresses: for a local stack, whose images are served on loopback.
	AllowPrivateImageHosts bool
	Now                    func() time.Time
	// Metrics, when set, counts the tool calls.
	Metrics *Metrics
}

// Router serves the tools.
type Router struct {
	cfg     Config
	mu      sync.Mutex
	flights map[string]*flight
	diagMu  sync.Mutex
	kept    *keptCache // the images Gongbu keeps, embedded most recently
}

// New returns a Router.
func New(cfg Config) *Router {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 30 * time.Second
	}
	if cfg.PollEvery <= 0 {
		cfg.PollEvery = 500 * time.Millisecond
	}
	if cfg.ImageLimit <= 0 {
		cfg.ImageLimit = 1 << 20
	}
	if cfg.KeptImageWait <= 0 {
		cfg.KeptImageWait = 5 * time.Second
	}
	if cfg.Images == nil {
		cfg.Images = ImageClient(cfg.AllowPrivateImageHosts, 30*time.Second, cfg.Logger)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Router{cfg: cfg, flights: map[string]*flight{}, kept: newKeptCache(keptCacheBytes)}
}
