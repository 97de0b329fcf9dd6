package mcpserver_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"hubu.dev/hubu/router/mcpserver"
)

// Each tool call is counted once, by how the router resolved it.
func TestToolCallsAreCounted(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	e := setup(t, &options{metrics: mcpserver.NewMetrics(reg)})
	const crane = `{"prompt":"a paper crane","model":"flux-dev","width":1024,"height":1024}`
	toolResult(t, e.call(t, "generate_image", fox, codex("call_1Fku5aBMwNg6sIYw8ZG3uWPL")))                                       // new
	toolResult(t, e.call(t, "generate_image", fox, codex("call_1Fku5aBMwNg6sIYw8ZG3uWPL")))                                       // replay
	mustError(t, e.call(t, "generate_image", crane, codex("call_1Fku5aBMwNg6sIYw8ZG3uWPL")), "call_reused_for_different_request") // conflict
	mustError(t, e.call(t, "generate_image", fox, nil), mcpserver.CodeIdentityRequired)                                           // refused
	e.call(t, "capabilities", `{}`, nil)                                                                                          // none

	for _, c := range []struct {
		tool, resolution string
		want             float64
	}{
		{"generate_image", "new", 1}, {"generate_image", "replay", 1}, {"generate_image", "conflict", 1},
		{"generate_image", "refused", 1}, {"generate_image", "continue", 0}, {"generate_image", "scope_conflict", 0},
		{"generate_image", "unavailable", 0}, {"capabilities", "none", 1},
	} {
		if got := counted(t, reg, c.tool, c.resolution); got != c.want {
			t.Errorf("router_tool_calls_total{tool=%q,resolution=%q} = %v, want %v", c.tool, c.resolution, got, c.want)
		}
	}
}

// counted is router_tool_calls_total's value for tool and resolution; 0 when it has no series.
func counted(t *testing.T, g prometheus.Gatherer, tool, resolution string) float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "router_tool_calls_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["tool"] == tool && labels["resolution"] == resolution {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
