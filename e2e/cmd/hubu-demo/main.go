// Command hubu-demo is `make demo`: a short scripted session against a running stack (make
// up; with HUBU_STACK_NAME or make's NAME, the stack of that name), through the router over
// streamable HTTP, sending _meta as real harnesses do. It prints each step and its outcome and
// saves the image.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"hubu.dev/hubu/e2e/stack"
	"hubu.dev/hubu/proto/bflapi"
)

func main() {
	// make demo NAME=x (HUBU_STACK_NAME=x) goes to the stack that make up NAME=x started.
	place, err := stack.PlaceOf(".", os.Getenv("HUBU_STACK_NAME"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "make demo: HUBU_STACK_NAME:", err)
		os.Exit(2)
	}
	envFile := flag.String("env", place.EnvPath(), "the stack's env file, written by make up")
	out := flag.String("out", filepath.Join(place.Dir, "demo.png"), "where to save the generated image")
	resume := flag.String("resume", "", "instead of the session, resume the approved spend with this public handle (make demo RESUME=…)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := run(ctx, *envFile, *out, *resume, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "make demo:", err)
		os.Exit(1)
	}
}

// readEnv reads KEY='value' lines as make up writes them.
func readEnv(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %v (is the stack up? run make up first)", path, err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		env[k] = strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(v, "'"), "'"), `'\''`, "'")
	}
	return env, sc.Err()
}

func run(ctx context.Context, envFile, out, resume string, w io.Writer) error {
	env, err := readEnv(envFile)
	if err != nil {
		return err
	}
	if env["MOCKFLUX_URL"] == "" {
		// The demo shows the provider's ledger, which only mockflux has, and it would spend real money.
		return errors.New("this stack spends on BFL's API (make up with BFL_API_KEY); the demo tells its story on mockflux: start make up without BFL_API_KEY")
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "hubu-demo"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: env["ROUTER_MCP_URL"], HTTPClient: &http.Client{Transport: stack.Bearer(env["ROUTER_MCP_TOKEN"])},
	}, nil)
	if err != nil {
		return fmt.Errorf("connect to the router at %s: %v", env["ROUTER_MCP_URL"], err)
	}
	defer cs.Close()
	flux, err := bflapi.NewClientWithResponses(env["MOCKFLUX_URL"])
	if err != nil {
		return err
	}
	charges := func() int {
		r, err := flux.ListChargesWithResponse(ctx)
		if err != nil || r.JSON200 == nil {
			return -1
		}
		return r.JSON200.Count
	}
	run := uuid.NewString()[:8]
	fox := json.RawMessage(`{"prompt":"an origami fox on a desk","model":"flux-dev","width":1024,"height":1024,"seed":7}`)
	call := func(step, tool string, args json.RawMessage, meta map[string]any) (*mcp.CallToolResult, map[string]any, error) {
		before := charges()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta})
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %v", step, err)
		}
		raw, _ := json.Marshal(res.StructuredContent)
		var sc map[string]any
		_ = json.Unmarshal(raw, &sc)
		outcome, _ := sc["status"].(string)
		if e, ok := sc["error"].(map[string]any); ok {
			outcome = fmt.Sprintf("%v: %v", e["code"], e["message"])
		}
		fmt.Fprintf(w, "%-58s %s\n%-58s charges at the provider: %d -> %d", step, outcome, "", before, charges())
		if sc["replayed"] == true {
			fmt.Fprint(w, "  (replayed)")
		}
		fmt.Fprintln(w)
		return res, sc, nil
	}

	if resume != "" {
		// What the agent does once a human approved its held spend: resume_operation, by handle.
		_, sc, err := call("resuming "+resume, "resume_operation", mustJSON(map[string]string{"public_handle": resume}), nil)
		if err != nil {
			return err
		}
		if sc["status"] != "succeeded" {
			return fmt.Errorf("the spend was not resumed: %v (approve it first: hubuctl approve %s)", sc["status"], resume)
		}
		return nil
	}

	fmt.Fprintf(w, "Hubu demo through %s\n\n", env["ROUTER_MCP_URL"])
	res, first, err := call("1. Codex generates an image (callId call_demo_"+run+"_1)", "generate_image", fox, map[string]any{"callId": "call_demo_" + run + "_1", "openai/session": "demo"})
	if err != nil {
		return err
	}
	if first["status"] != "succeeded" {
		return errors.New("the first image was not generated")
	}
	for _, c := range res.Content {
		if img, ok := c.(*mcp.ImageContent); ok {
			if err := os.MkdirAll(filepath.Dir(out), 0o700); err == nil && os.WriteFile(out, img.Data, 0o600) == nil {
				fmt.Fprintf(w, "%-58s saved %s (%d bytes)\n", "", out, len(img.Data))
			}
		}
	}
	if _, _, err := call("2. the same call delivered again (a reconnect)", "generate_image", fox, map[string]any{"callId": "call_demo_" + run + "_1", "openai/session": "demo"}); err != nil {
		return err
	}
	if _, _, err := call("3. a new call with the same prompt (callId call_demo_"+run+"_2)", "generate_image", fox, map[string]any{"callId": "call_demo_" + run + "_2", "openai/session": "demo"}); err != nil {
		return err
	}
	if _, _, err := call("4. a call with only session context (ChatGPT chat)", "generate_image", fox, map[string]any{"openai/session": "demo", "openai/subject": "u"}); err != nil {
		return err
	}
	ultra := json.RawMessage(`{"prompt":"a cathedral folded from paper","model":"flux-pro-1.1-ultra","aspect_ratio":"16:9"}`)
	_, held, err := call("5. a $0.06 spend, above the $0.05 auto-approve limit", "generate_image", ultra, map[string]any{"callId": "call_demo_" + run + "_3"})
	if err != nil {
		return err
	}
	// Lines that work pasted into bash or zsh from any directory (TestQuickStart runs them).
	absEnv, _ := filepath.Abs(envFile)
	hubuctl, _ := filepath.Abs(filepath.Join("bin", "hubuctl")) // make up builds it there; make demo runs at the root
	fmt.Fprintf(w, "\nThe last spend waits for a human. Approve it, then resume it as its agent would (bash or zsh):\n\n"+
		"  set -a; . %s; set +a\n  %s approve %v\n  make demo%s RESUME=%v\n",
		stack.ShellWord(absEnv), stack.ShellWord(hubuctl), held["public_handle"], nameArg(), held["public_handle"])
	return nil
}

// mustJSON encodes v, which is always encodable.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// nameArg is make's NAME= for a named stack, so the printed line goes to the same stack.
func nameArg() string {
	if n := os.Getenv("HUBU_STACK_NAME"); n != "" {
		return " NAME=" + stack.ShellWord(n)
	}
	return ""
}
