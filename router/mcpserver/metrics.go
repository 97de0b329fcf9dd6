package mcpserver

import (
	"github.com/prometheus/client_golang/prometheus"

	"hubu.dev/hubu/router/registry"
)

// How a tool call was resolved, as router_tool_calls_total counts it. Besides the registry's
// resolutions (new, continue, replay, conflict, scope_conflict):
const (
	// ResolutionRefused: the router refused the call before the registry recorded anything
	// (identity, arguments, or a platform this router may not start operations for).
	ResolutionRefused = "refused"
	// ResolutionUnavailable: the registry could not resolve it (an outage, no preallocated
	// keys left); nothing was sent.
	ResolutionUnavailable = "unavailable"
	// ResolutionNone: a tool that names an operation by its handle, which the registry does
	// not resolve.
	ResolutionNone = "none"
)

// Metrics are the router's counters. The labels are the tool and how its call was resolved,
// never a call id, a handle, a key or a token, so /metrics may be served without the MCP token.
type Metrics struct {
	calls *prometheus.CounterVec
}

// NewMetrics registers router_tool_calls_total{tool,resolution} on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{calls: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "router_tool_calls_total",
		Help: "Tool calls by tool and resolution (new, continue, replay, conflict, scope_conflict, refused, unavailable, none).",
	}, []string{"tool", "resolution"})}
	// The spend tools' series exist from the start, so a rate over them is defined at once.
	for _, res := range []string{registry.New.String(), registry.Continue.String(), registry.Replay.String(),
		registry.Conflict.String(), registry.ScopeConflict.String(), ResolutionRefused, ResolutionUnavailable} {
		for _, tool := range []string{ToolGenerateImage, ToolEditImage} {
			m.calls.WithLabelValues(tool, res)
		}
	}
	reg.MustRegister(m.calls)
	return m
}

// countCall counts one call of tool; a Router without Metrics counts nothing.
func (r *Router) countCall(tool, resolution string) {
	if r.cfg.Metrics == nil {
		return
	}
	r.cfg.Metrics.calls.WithLabelValues(tool, resolution).Inc()
}
