package loadtest

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"hubu.dev/hubu/e2e/otlpsink"
	"hubu.dev/hubu/e2e/stack"
)

// PathReport is scenario 4, path: where a new spend's time goes, hop by hop. A stack of its
// own runs with tracing on, exporting to a receiver in the load generator; N new spends go one
// after another through one MCP session, each under a traceparent of its own in _meta, so that
// each is one trace. For every step of a spend (a span, by its service and name, and which
// occurrence of it in the trace) the report gives the p50, over the spends, of when it started
// after the router took the call, and of how long it took. Recording and exporting the spans
// costs time of its own: the totals are above the latency scenario's, and the latency
// scenario's figures, not these, are the ones to compare with a target.
type PathReport struct {
	Spends int `json:"spends"`
	// Traced is how many of the spends' traces arrived with the router's span of the call.
	Traced int `json:"traced"`
	// Total is the router's span of each call: the spend as the router served it.
	Total  Dist       `json:"total"`
	Steps  []PathStep `json:"steps"`
	Errors errorLog   `json:"errors"`
}

// PathStep is one step of a spend, over the traces that have it.
type PathStep struct {
	Service string `json:"service"`
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	// Occurrence numbers the spans of that service and name within one trace, in the order
	// they started (a second poll of the provider is occurrence 2).
	Occurrence int    `json:"occurrence"`
	In         int    `json:"in"` // how many of the traces have it
	StartP50   Millis `json:"start_p50_ms"`
	TookP50    Millis `json:"took_p50_ms"`
}

// rootSpan is the name of the router's span of a generate_image call.
const rootSpan = "tools/call generate_image"

func runPath(ctx context.Context, cfg Config, dir string) (*PathReport, error) {
	sink, err := startSpanSink()
	if err != nil {
		return nil, err
	}
	defer sink.close()
	hubuDB, gongbuDB := "hubu_"+cfg.Name+"_path", "gongbu_"+cfg.Name+"_path"
	if err := stack.DropDatabases(ctx, cfg.ServerURL, hubuDB, gongbuDB); err != nil {
		return nil, fmt.Errorf("drop the databases of an earlier run: %v", err)
	}
	defer func() {
		if err := stack.DropDatabases(context.WithoutCancel(ctx), cfg.ServerURL, hubuDB, gongbuDB); err != nil {
			cfg.say("could not drop %s and %s: %v", hubuDB, gongbuDB, err)
		}
	}()
	cfg.say("path: starting a stack with tracing on ...")
	traced := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + sink.url, "OTEL_BSP_SCHEDULE_DELAY=100"}
	s, err := stack.Start(ctx, cfg.Bin, stack.Config{
		Dir: filepath.Join(dir, "path-stack"), ServerURL: cfg.ServerURL, HubuDB: hubuDB, GongbuDB: gongbuDB, FluxIdempotent: !cfg.ProviderIgnoresKeys,
		Env: cfg.stackEnv(map[string][]string{
			"router": traced, "hubu": traced, "gongbu": traced,
			"mockflux": append([]string{"MOCKFLUX_PENDING_POLLS=0", "MOCKFLUX_RENDER_TIME=" + cfg.RenderTime.String()}, traced...),
		}),
	})
	if err != nil {
		return nil, fmt.Errorf("start the traced stack: %w", err)
	}
	defer s.Stop()
	if err := unlimitDemoAgent(ctx, s); err != nil {
		return nil, err
	}
	rc := newRouterClient(s.Router.URL()+"/mcp", s.Credentials.RouterMCPToken, 1)
	defer rc.close()
	cs, err := rc.connect(ctx, "hubu-loadtest-path")
	if err != nil {
		return nil, fmt.Errorf("connect to the router: %w", err)
	}
	defer cs.Close()

	n := cfg.PathSpends
	cfg.say("path: %d traced spends, one after another ...", n)
	rep := &PathReport{Spends: n}
	run := runID()
	var traces []string
	for i := range n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		trace := otlpsink.RandomHex(16)
		meta := mcp.Meta{"callId": fmt.Sprintf("call_loadtest_%s_path_%06d", run, i), "traceparent": "00-" + trace + "-" + otlpsink.RandomHex(8) + "-01"}
		out, _, err := spendWith(ctx, cs, meta, spendArgs(fmt.Sprintf("load test %s: path, spend %d", run, i)))
		switch {
		case err != nil:
			rep.Errors.add("new spend: " + err.Error())
		case out.problem(false) != "":
			rep.Errors.add("new spend: " + out.problem(false))
		default:
			traces = append(traces, trace)
		}
	}
	// The processes export every 100 ms; a spend's last steps (Gongbu's report to Hubu) may end
	// after its answer. Wait until nothing more arrives for a while, within a bound.
	sink.settle(ctx, 500*time.Millisecond, 15*time.Second)
	rep.summarize(sink, traces)
	if missing := len(traces) - rep.Traced; missing > 0 {
		// Without its trace a spend tells nothing here: a run that lost them measured nothing.
		rep.Errors.add(fmt.Sprintf("%d of the spends' traces never arrived with the router's span of the call", missing))
	}
	return rep, nil
}

// spanRec is one exported span, as the report needs it.
type spanRec struct {
	service, name, kind string
	start, end          time.Time
}

// summarize computes the steps over the traces of the spends that succeeded.
func (rep *PathReport) summarize(sink *spanSink, traces []string) {
	type key struct {
		service, name, kind string
		occurrence          int
	}
	starts, tooks := map[key][]time.Duration{}, map[key][]time.Duration{}
	var totals []time.Duration
	for _, trace := range traces {
		spans := sink.trace(trace)
		i := slices.IndexFunc(spans, func(s spanRec) bool { return s.service == "hubu-unified-mcp" && s.name == rootSpan })
		if i < 0 {
			continue
		}
		rep.Traced++
		t0 := spans[i].start
		totals = append(totals, spans[i].end.Sub(t0))
		slices.SortFunc(spans, func(a, b spanRec) int { return a.start.Compare(b.start) })
		seen := map[[2]string]int{}
		for _, s := range spans {
			seen[[2]string{s.service, s.name}]++
			k := key{s.service, s.name, s.kind, seen[[2]string{s.service, s.name}]}
			starts[k] = append(starts[k], s.start.Sub(t0))
			tooks[k] = append(tooks[k], s.end.Sub(s.start))
		}
	}
	rep.Total = NewDist(totals)
	for k, st := range starts {
		rep.Steps = append(rep.Steps, PathStep{Service: k.service, Name: k.name, Kind: k.kind, Occurrence: k.occurrence,
			In: len(st), StartP50: NewDist(st).P50, TookP50: NewDist(tooks[k]).P50})
	}
	slices.SortFunc(rep.Steps, func(a, b PathStep) int {
		return cmp.Or(cmp.Compare(a.StartP50, b.StartP50), cmp.Compare(b.TookP50, a.TookP50), strings.Compare(a.Name, b.Name))
	})
}

// spanSink serves an otlpsink.Sink on a loopback port.
type spanSink struct {
	*otlpsink.Sink
	url string
	srv *http.Server
}

func startSpanSink() (*spanSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the spans: %w", err)
	}
	k := &spanSink{Sink: &otlpsink.Sink{}, url: "http://" + ln.Addr().String()}
	k.srv = &http.Server{Handler: k.Sink, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = k.srv.Serve(ln) }()
	return k, nil
}

func (k *spanSink) close() { _ = k.srv.Close() }

// trace is the spans of trace, as the report needs them.
func (k *spanSink) trace(trace string) []spanRec {
	var out []spanRec
	for _, s := range k.Trace(trace) {
		out = append(out, spanRec{
			service: s.Service, name: s.Name, kind: strings.ToLower(strings.TrimPrefix(s.Kind.String(), "SPAN_KIND_")),
			start: time.Unix(0, int64(s.StartTimeUnixNano)), end: time.Unix(0, int64(s.EndTimeUnixNano)),
		})
	}
	return out
}

// settle returns once no export has arrived for quiet, or after bound.
func (k *spanSink) settle(ctx context.Context, quiet, bound time.Duration) {
	deadline := time.Now().Add(bound)
	tick := time.NewTicker(quiet / 5)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		if last := k.LastExport(); !last.IsZero() && time.Since(last) >= quiet {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
