package interop_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	harness "hubu.dev/hubu/e2e/stack"
	"hubu.dev/hubu/kit/waitfor"
	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/sql/sqltest"
)

// interopStack is the real stack for one harness, on databases of its own.
type interopStack struct {
	t    *testing.T
	s    *harness.Stack
	flux *bflapi.ClientWithResponses
	// metaLog is the --diagnose-meta file of every stdio router the harness starts.
	metaLog string
}

func startStack(t *testing.T) *interopStack {
	t.Helper()
	server := sqltest.ServerURL(t)
	id := strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	dir := t.TempDir()
	hubuDB, gongbuDB := "hubu_interop_"+id, "gongbu_interop_"+id
	s, err := harness.Start(context.Background(), bin, harness.Config{
		Dir: dir, ServerURL: server, HubuDB: hubuDB, GongbuDB: gongbuDB, FluxIdempotent: true,
	})
	noError(t, err)
	t.Cleanup(func() {
		s.Stop()
		_ = harness.DropDatabases(context.Background(), server, hubuDB, gongbuDB)
	})
	flux, err := bflapi.NewClientWithResponses(s.Flux.URL())
	noError(t, err)
	return &interopStack{t: t, s: s, flux: flux, metaLog: filepath.Join(dir, "diagnose-meta.jsonl")}
}

// routerCommand is the stdio router a harness launches: the stack's, as `make up` prints it,
// plus --diagnose-meta.
func (st *interopStack) routerCommand() (path string, args []string) {
	return bin.Path("hubu-unified-mcp"), st.s.RouterArgs("--diagnose-meta=" + st.metaLog)
}

// charges is how many times mockflux charged.
func (st *interopStack) charges() int {
	st.t.Helper()
	resp, err := st.flux.ListChargesWithResponse(context.Background())
	if err != nil || resp.JSON200 == nil {
		st.t.Fatalf("mockflux charges: %v", err)
	}
	return resp.JSON200.Count
}

// requireCharges waits (bounded) for n charges, then makes sure no late one follows.
func (st *interopStack) requireCharges(n int) {
	st.t.Helper()
	waitfor.Within(10*time.Second, func() bool { return st.charges() >= n })
	time.Sleep(500 * time.Millisecond) // an observation window for a late charge, not synchronization
	if got := st.charges(); got != n {
		st.t.Fatalf("mockflux charged %d times, want %d", got, n)
	}
}

// metaShape and diagnoseLine are the router's --diagnose-meta lines.
type metaShape struct {
	Key    string `json:"key"`
	Type   string `json:"type"`
	Length int    `json:"length"`
	SHA256 string `json:"sha256_8"`
}

type diagnoseLine struct {
	Tool    string      `json:"tool"`
	Meta    []metaShape `json:"meta"`
	Verdict string      `json:"verdict"`
}

// diagnosed is every --diagnose-meta line written so far.
func (st *interopStack) diagnosed() []diagnoseLine {
	st.t.Helper()
	f, err := os.Open(st.metaLog)
	if err != nil {
		st.t.Fatalf("the router wrote no --diagnose-meta lines: %v", err)
	}
	defer f.Close()
	var lines []diagnoseLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var d diagnoseLine
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			st.t.Fatalf("%s: %v", st.metaLog, err)
		}
		lines = append(lines, d)
	}
	return lines
}

// requireDiagnosed finds the diagnose line of the call whose id is callID under key and
// requires its verdict. The line holds only the id's digest: the digest of what the fake
// issued must be there.
func (st *interopStack) requireDiagnosed(key, callID, verdict string) {
	st.t.Helper()
	want := digest8(callID)
	for _, d := range st.diagnosed() {
		if d.Tool == "generate_image" && slices.Contains(d.Meta, metaShape{Key: key, Type: "string", Length: len(callID), SHA256: want}) {
			if d.Verdict != verdict {
				st.t.Fatalf("call %s: the router decided %q, want %q", callID, d.Verdict, verdict)
			}
			return
		}
	}
	st.t.Fatalf("no generate_image call with _meta %q of digest %s (the id the fake issued, %s) in %s", key, want, callID, st.metaLog)
}

func digest8(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}

// requireNoSecrets fails when any file under dir, or out, holds a private operation key or
// one of the stack's tokens. skip names files (relative to dir) that hold the agent's token by
// design: the MCP server entry the user wrote, as the docs say.
func (st *interopStack) requireNoSecrets(dir string, out string, skip ...string) {
	st.t.Helper()
	c := st.s.Credentials
	tokens := []string{c.OperatorToken, c.GongbuAtHubuToken, c.HubuAtGongbuToken, c.RouterMCPToken, c.AgentToken, c.FluxKey}
	check := func(where, text string, agentTokenAllowed bool) {
		if strings.Contains(text, "hubu:operation:v1:") {
			st.t.Errorf("%s holds a private operation key", where)
		}
		for _, tok := range tokens {
			if tok != "" && !(agentTokenAllowed && tok == c.AgentToken) && strings.Contains(text, tok) {
				st.t.Errorf("%s holds a token of the stack", where)
			}
		}
	}
	check("the harness's output", out, false)
	files, kept := 0, 0
	noError(st.t, filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		if strings.Contains(string(b), "hubu:public-operation:v1:") {
			kept++
		}
		check(rel, string(b), slices.Contains(skip, rel))
		return nil
	}))
	st.t.Logf("scanned the harness's output and the %d files it stored under its home; %d hold tool results", files, kept)
	// The harness must have kept the router's answers (they name the public handle), or the
	// scan would prove nothing.
	if kept == 0 {
		st.t.Fatalf("none of the %d files the harness stored under %s holds a tool result: the scan would prove nothing", files, dir)
	}
}

// toolOutcome is what the harness got back from the router for one call: the structured
// content, found in whatever wrapping the harness keeps the tool result in (the router's text
// carries it as JSON on its second line).
type toolOutcome struct {
	Status   string `json:"status"`
	Replayed bool   `json:"replayed"`
	Error    struct {
		Code string `json:"code"`
	} `json:"error"`
}

// outcome digs the structured content out of a tool result as the harness sent it to the model.
func outcome(raw string) (toolOutcome, bool) {
	var v any
	if json.Unmarshal([]byte(raw), &v) != nil {
		// Text: one of its lines is the structured content.
		for _, line := range strings.Split(raw, "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "{") {
				if o, ok := outcome(line); ok {
					return o, true
				}
			}
		}
		return toolOutcome{}, false
	}
	switch x := v.(type) {
	case string:
		return outcome(x)
	case map[string]any:
		if _, ok := x["status"].(string); ok {
			if _, ok := x["replayed"].(bool); ok {
				var o toolOutcome
				_ = json.Unmarshal([]byte(raw), &o)
				return o, true
			}
		}
		for _, k := range []string{"structuredContent", "structured_content", "content", "text", "output"} {
			if c, ok := x[k]; ok {
				b, _ := json.Marshal(c)
				if o, ok := outcome(string(b)); ok {
					return o, true
				}
			}
		}
	case []any:
		for _, c := range x {
			b, _ := json.Marshal(c)
			if o, ok := outcome(string(b)); ok {
				return o, true
			}
		}
	}
	return toolOutcome{}, false
}
