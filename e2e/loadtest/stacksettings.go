package loadtest

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// StackReport says what the run went through when it did not start its stack itself: the
// running stack's env file, and how its settings differ from the stack the load test starts.
type StackReport struct {
	File string `json:"file"`
	// Settings are the stack's settings that bear on the figures, each beside the benchmark's
	// own; Differs marks those that are not the same.
	Settings []StackSetting `json:"settings"`
	// Postgres says whose Postgres the contract floor's commits and the Postgres CPU are of.
	Postgres string `json:"postgres"`
	// DemoAgent says what became of the demo agent's policy and budget.
	DemoAgent string `json:"demo_agent,omitempty"`
}

// StackSetting is one setting of the running stack beside the benchmark's own stack's.
type StackSetting struct {
	Setting   string `json:"setting"`
	Stack     string `json:"stack"`
	Benchmark string `json:"benchmark"`
	Differs   bool   `json:"differs"`
}

// write prints the block at the top of the text report: which stack, how it differs from
// the benchmark's own, whose Postgres, and what became of the demo agent.
func (r *StackReport) write(w io.Writer) {
	diff := r.Differing()
	if len(diff) == 0 {
		fmt.Fprintf(w, "\nagainst a running stack: %s; differs from the benchmark's own stack: in none of the settings compared\n", r.File)
	} else {
		fmt.Fprintf(w, "\nagainst a running stack: %s; differs from the benchmark's own stack:\n", r.File)
		for _, s := range diff {
			fmt.Fprintf(w, "  %s: %s (the benchmark's own: %s)\n", s.Setting, s.Stack, s.Benchmark)
		}
	}
	same := make([]string, 0, len(r.Settings))
	for _, s := range r.Settings {
		if !s.Differs {
			same = append(same, s.Setting+" "+s.Stack)
		}
	}
	if len(same) > 0 && len(diff) > 0 {
		fmt.Fprintf(w, "  the same: %s\n", strings.Join(same, ", "))
	}
	fmt.Fprintf(w, "  Postgres: %s\n", r.Postgres)
	if r.DemoAgent != "" {
		fmt.Fprintf(w, "  demo agent: %s\n", r.DemoAgent)
	}
}

// Differing lists the settings that differ from the benchmark's own stack.
func (r *StackReport) Differing() []StackSetting {
	var out []StackSetting
	for _, s := range r.Settings {
		if s.Differs {
			out = append(out, s)
		}
	}
	return out
}

// The benchmark's own stack's mockflux, for the comparison: what runThroughRouter starts.
const (
	benchmarkPendingPolls = "0"
	mockfluxPendingPolls  = "1" // mockflux's default (--pending-polls)
)

// stackSettings reads the running stack's settings from its processes (found by the ports
// they listen on): each Go service's GOMAXPROCS, mockflux's pending polls and render time, and
// whether mockflux honours idempotency keys and Gongbu relies on them. cfg holds the
// benchmark's own values (its defaults: --stack takes none of them).
func stackSettings(cfg Config, t *target) []StackSetting {
	var out []StackSetting
	add := func(setting, stack, benchmark string) {
		out = append(out, StackSetting{Setting: setting, Stack: stack, Benchmark: benchmark, Differs: stack != benchmark})
	}
	benchProcs := "default"
	if cfg.ServiceProcs > 0 {
		benchProcs = strconv.Itoa(cfg.ServiceProcs)
	}
	pids := map[string]int{}
	for _, p := range []struct{ name, addr string }{{"router", t.router}, {"hubu", t.hubu}, {"gongbu", t.gongbu}, {"mockflux", t.flux}} {
		pid, err := pidListening(p.addr)
		if err != nil {
			add(p.name+" GOMAXPROCS", "unknown: "+err.Error(), benchProcs)
			continue
		}
		pids[p.name] = pid
		add(p.name+" GOMAXPROCS", gomaxprocsOf(pid), benchProcs)
	}
	flux, ok := pids["mockflux"]
	if ok {
		add("mockflux pending polls", processSetting(flux, "pending-polls", "MOCKFLUX_PENDING_POLLS", mockfluxPendingPolls, false), benchmarkPendingPolls)
		add("mockflux render time", durationSetting(processSetting(flux, "render-time", "MOCKFLUX_RENDER_TIME", "0s", false)), cfg.RenderTime.String())
		add("mockflux honours idempotency keys", processSetting(flux, "honour-idempotency", "MOCKFLUX_HONOUR_IDEMPOTENCY", "false", true),
			strconv.FormatBool(!cfg.ProviderIgnoresKeys))
	}
	if pid, ok := pids["gongbu"]; ok {
		add("Gongbu relies on idempotency keys", processSetting(pid, "flux-idempotent", "GONGBU_FLUX_IDEMPOTENT", "false", true),
			strconv.FormatBool(!cfg.ProviderIgnoresKeys))
	}
	return out
}

// durationSetting writes a duration as time.Duration does, so that 0 and 0s compare equal.
func durationSetting(v string) string {
	if d, err := time.ParseDuration(v); err == nil {
		return d.String()
	}
	return v
}

// processSetting is the value process pid runs with for a setting of kit/command's kind:
// flag --name on its command line (/proc/<pid>/cmdline), else the variable env in its
// environment (/proc/<pid>/environ), else def. A boolean flag given alone is true.
func processSetting(pid int, name, env, def string, boolean bool) string {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return "unknown: " + err.Error()
	}
	if v, ok := flagValue(strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"), name, boolean); ok {
		return v
	}
	v, err := environValue(pid, env)
	switch {
	case err != nil:
		return "unknown: " + err.Error()
	case v != "":
		if boolean {
			if b, err := strconv.ParseBool(v); err == nil {
				return strconv.FormatBool(b)
			}
		}
		return v
	}
	return def
}

// flagValue finds flag name among a command line's arguments as Go's flag package reads them
// (-name or --name, =value or the next argument; a boolean takes only =value), the last one
// winning; it stops at "--" or the first argument that is not a flag after the subcommand.
func flagValue(args []string, name string, boolean bool) (string, bool) {
	var value string
	found := false
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") {
			continue // the program's subcommand (serve), or another flag's value
		}
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		k, v, hasValue := strings.Cut(a, "=")
		if k != name {
			continue
		}
		switch {
		case hasValue:
			value = v
		case boolean:
			value = "true"
		case i+1 < len(args):
			i++
			value = args[i]
		default:
			continue
		}
		if boolean {
			if b, err := strconv.ParseBool(value); err == nil {
				value = strconv.FormatBool(b)
			}
		}
		found = true
	}
	return value, found
}
