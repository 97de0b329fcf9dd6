// Command hubuctl is Hubu's operator CLI: it lists and decides approval holds, manages agents,
// their policies, the price catalog and the credentials (credentials.go), and shows operations
// and their ledgers. It talks to
// Hubu only through the generated client, with an operator (approver) token.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"hubu.dev/hubu/proto/hubuapi"
)

const usage = `hubuctl — operator CLI for Hubu

usage: hubuctl [--url URL] [--token TOKEN] [--json] COMMAND [ARGS]

commands:
  approvals                          operations waiting for a human decision
  approve HANDLE                     approve a held operation
  deny HANDLE [--reason TEXT]        deny a held operation (releases its hold)
  operation show HANDLE              one operation
  ledger HANDLE                      ledger entries and totals of one operation
  agent create --name NAME [...]     create an agent; prints its token once
  agent list                         all agents
  agent show ID                      one agent and its policy
  agent set-policy ID [...]          change some of an agent's policy
  agent set-account ID ACCOUNT       move an agent to another billing account
  prices list                        the price catalog
  prices set --provider P --model M --size S --amount-micros N [--currency USD]
  credentials list                   agent, operator and service credentials (never tokens)
  credentials revoke ID              revoke a credential; its next request is refused
  credentials rotate ID [--overlap D]  issue a replacement; prints its token once

global flags (accepted anywhere):
  --url URL       Hubu's base URL (env HUBU_URL)
  --token TOKEN   operator (approver) token (env HUBU_APPROVER_TOKEN; prefer the
                  environment, command lines are visible to other users)
  --json          print the API's JSON response instead of a table

Run 'hubuctl COMMAND --help' for a command's flags.
Exit status: 0 done; 1 the API refused or could not be reached; 2 usage or settings error.`

const policyFlagsUsage = `policy flags (amounts in micro-units, 1000000 = 1.00):
  --auto-approve-micros N   above this an operation waits for a human
  --ceiling-micros N        above this an operation is denied
  --budget-micros N         holds and captures allowed per period
  --period day|week|month   the budget period (UTC calendar periods)
  --models a,b              allowed models, * for all, '' for none
  --providers p,q           allowed providers, * for all, '' for none
  --currency CODE           ISO 4217 code such as USD`

// The spec's formats (proto/hubu.openapi.yaml), checked here so that a mistyped argument is
// a usage error rather than a round trip.
var publicHandleRE = regexp.MustCompile(`^hubu:public-operation:v1:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code(err))
}

// usageError is a mistake in the command line or the settings: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// apiError is a problem+json answer from Hubu: exit status 1.
type apiError struct {
	Status int
	Code   string
	Detail string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Detail }

// code maps run's result to the exit status.
func code(err error) int {
	var u *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u):
		return 2
	default:
		return 1
	}
}

// run is the whole program; tests call it in-process. It prints its own error line.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c := &cli{getenv: getenv, stdout: stdout, stderr: stderr}
	err := c.dispatch(ctx, args)
	if err != nil {
		fmt.Fprintln(stderr, "hubuctl: "+oneLine(err.Error()))
	}
	return err
}

// cli carries the settings shared by every command.
type cli struct {
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer

	url     string
	token   string
	jsonOut bool
}

// errHelp ends a command after its help was printed; run treats it as success.
var errHelp = errors.New("help")

func (c *cli) dispatch(ctx context.Context, args []string) error {
	err := c.group(ctx, "", usage, args, map[string]func(context.Context, []string) error{
		"approvals": c.approvals,
		"approve":   c.approve,
		"deny":      c.deny,
		"ledger":    c.ledger,
		"operation": func(ctx context.Context, args []string) error {
			return c.group(ctx, "operation", "usage: hubuctl operation show HANDLE", args, map[string]func(context.Context, []string) error{
				"show": c.operationShow,
			})
		},
		"agent": func(ctx context.Context, args []string) error {
			return c.group(ctx, "agent", agentUsage, args, map[string]func(context.Context, []string) error{
				"create":      c.agentCreate,
				"list":        c.agentList,
				"show":        c.agentShow,
				"set-policy":  c.agentSetPolicy,
				"set-account": c.agentSetAccount,
			})
		},
		"credentials": c.credentials,
		"prices": func(ctx context.Context, args []string) error {
			return c.group(ctx, "prices", pricesUsage, args, map[string]func(context.Context, []string) error{
				"list": c.pricesList,
				"set":  c.pricesSet,
			})
		},
	})
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}

const agentUsage = `usage:
  hubuctl agent create --name NAME [--account ACCOUNT] [policy flags]
  hubuctl agent list
  hubuctl agent show ID
  hubuctl agent set-policy ID [policy flags]
  hubuctl agent set-account ID ACCOUNT`

const pricesUsage = `usage:
  hubuctl prices list
  hubuctl prices set --provider P --model M --size S --amount-micros N [--currency USD]`

// group parses global flags up to a sub-command's name and runs it. `help X` is `X --help`.
func (c *cli) group(ctx context.Context, name, text string, args []string, cmds map[string]func(context.Context, []string) error) error {
	full := strings.TrimSpace("hubuctl " + name)
	fs := c.flagSet(full)
	if err := fs.Parse(args); err != nil {
		return c.parseError(full, text, err)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		if name == "" {
			return usagef("missing command (see hubuctl --help)")
		}
		return usagef("missing %s command (see %s --help)", name, full)
	}
	sub, subArgs := rest[0], rest[1:]
	if sub == "help" {
		if len(subArgs) == 0 {
			fmt.Fprintln(c.stdout, text)
			return errHelp
		}
		sub, subArgs = subArgs[0], append(subArgs[1:], "--help")
	}
	fn, ok := cmds[sub]
	if !ok {
		return usagef("unknown command %q (see %s --help)", strings.TrimSpace(name+" "+sub), full)
	}
	return fn(ctx, subArgs)
}

// flagSet makes a flag set with the global flags; the caller adds the command's own. The
// global flags are bound to the same fields at every level, so they may appear anywhere.
func (c *cli) flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // usage is printed by us: help to stdout, errors as one line
	fs.Usage = func() {}
	fs.StringVar(&c.url, "url", c.url, "")
	// No default from the environment here: a flag default could end up in printed help.
	fs.StringVar(&c.token, "token", c.token, "")
	fs.BoolVar(&c.jsonOut, "json", c.jsonOut, "")
	return fs
}

func (c *cli) parseError(name, text string, err error) error {
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(c.stdout, text)
		return errHelp
	}
	return usagef("%s: %v (see %s --help)", name, err, name)
}

// parse parses a command's flags, which may come before, between or after its nargs
// positional arguments.
func (c *cli) parse(fs *flag.FlagSet, text string, args []string, nargs int, names string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, c.parseError(fs.Name(), text, err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	if len(pos) != nargs {
		if nargs == 0 {
			return nil, usagef("%s: unexpected argument %q (see %s --help)", fs.Name(), pos[0], fs.Name())
		}
		return nil, usagef("%s: needs %s (see %s --help)", fs.Name(), names, fs.Name())
	}
	return pos, nil
}

// client checks the settings and returns the generated client. Called after argument
// parsing, so that --help and usage errors need no settings.
func (c *cli) client() (*hubuapi.ClientWithResponses, error) {
	base := c.url
	if base == "" {
		base = c.getenv("HUBU_URL")
	}
	token := c.token
	if token == "" {
		token = c.getenv("HUBU_APPROVER_TOKEN")
	}
	if base == "" {
		return nil, usagef("HUBU_URL (or --url) is required, e.g. http://127.0.0.1:8081")
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, usagef("HUBU_URL (or --url) must be an http:// or https:// URL such as http://127.0.0.1:8081")
	}
	if token == "" {
		return nil, usagef("HUBU_APPROVER_TOKEN (or --token) is required")
	}
	if strings.ContainsFunc(token, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return nil, usagef("HUBU_APPROVER_TOKEN (or --token) must not contain spaces or control characters")
	}
	return hubuapi.NewClientWithResponses(base,
		hubuapi.WithHTTPClient(&http.Client{Timeout: 30 * time.Second}),
		hubuapi.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("User-Agent", "hubuctl")
			return nil
		}))
}

// response is what every generated ...Response has.
type response interface {
	StatusCode() int
	Status() string
	GetBody() []byte
}

// expect returns nil when the call succeeded with the body the command needs (body picks it
// from the generated response), else the error to report: Hubu's problem details where it
// sent them. The problem is read from the raw body so that a status the spec does not list
// for an operation (a 404 from a proxy, a 503) is still reported by its code.
func expect[R response, T any](resp R, err error, body func(R) *T) error {
	if err != nil {
		return fmt.Errorf("request to Hubu failed: %w", err)
	}
	if body(resp) != nil && resp.StatusCode()/100 == 2 {
		return nil
	}
	var p hubuapi.Problem
	if json.Unmarshal(resp.GetBody(), &p) == nil && p.Code != "" {
		detail := p.Title
		if p.Detail != nil && *p.Detail != "" {
			detail = *p.Detail
		}
		return &apiError{Status: resp.StatusCode(), Code: string(p.Code), Detail: detail}
	}
	return fmt.Errorf("unexpected response from Hubu: %s", resp.Status())
}

// printJSON writes an API response body indented, for --json.
func (c *cli) printJSON(body []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(body), "", "  "); err != nil {
		return fmt.Errorf("the response body is not JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := c.stdout.Write(buf.Bytes())
	return err
}

// ---- approvals and operations ----

func (c *cli) approvals(ctx context.Context, args []string) error {
	const text = `usage: hubuctl approvals [--json]

Lists the operations waiting for a human decision, oldest first.`
	fs := c.flagSet("hubuctl approvals")
	if _, err := c.parse(fs, text, args, 0, ""); err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	resp, err := cl.ListApprovalsWithResponse(ctx)
	if err := expect(resp, err, (*hubuapi.ListApprovalsResponse).GetJSON200); err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(resp.Body)
	}
	return writeApprovals(c.stdout, resp.JSON200.Operations)
}

func writeApprovals(w io.Writer, ops []hubuapi.Operation) error {
	if len(ops) == 0 {
		_, err := fmt.Fprintln(w, "No operations are waiting for approval.")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "HANDLE\tAGENT\tMODEL\tSIZE\tAMOUNT\tPROMPT\tREQUESTED\tEXPIRES")
	for _, op := range ops {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			clean(op.PublicHandle), op.AgentId, clean(op.Scope.Model), clean(op.Scope.Size),
			formatAmount(op.AmountMicros, op.Currency), truncate(clean(op.Arguments.Prompt), 40),
			formatTime(op.CreatedAt), formatTimePtr(op.ApprovalExpiresAt))
	}
	return tw.Flush()
}

func (c *cli) approve(ctx context.Context, args []string) error {
	const text = `usage: hubuctl approve HANDLE [--json]

Approves an operation held for approval and issues its decision; the agent then resumes it.
Approving an operation that is already approved answers the same.`
	fs := c.flagSet("hubuctl approve")
	pos, err := c.parse(fs, text, args, 1, "one public handle")
	if err != nil {
		return err
	}
	handle, err := parseHandle(pos[0])
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	resp, err := cl.ApproveOperationWithResponse(ctx, handle)
	if err := expect(resp, err, (*hubuapi.ApproveOperationResponse).GetJSON200); err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(resp.Body)
	}
	op := resp.JSON200
	fmt.Fprintf(c.stdout, "Approved %s (%s). The agent can now resume it.\n\n", op.PublicHandle, formatAmount(op.AmountMicros, op.Currency))
	return writeOperation(c.stdout, op)
}

func (c *cli) deny(ctx context.Context, args []string) error {
	const text = `usage: hubuctl deny HANDLE [--reason TEXT] [--json]

Denies an operation held for approval and releases its hold. Denying it again answers the same.

  --reason TEXT   why (at most 500 characters), recorded with the decision`
	fs := c.flagSet("hubuctl deny")
	reason := fs.String("reason", "", "")
	pos, err := c.parse(fs, text, args, 1, "one public handle")
	if err != nil {
		return err
	}
	handle, err := parseHandle(pos[0])
	if err != nil {
		return err
	}
	if utf8.RuneCountInString(*reason) > 500 {
		return usagef("hubuctl deny: --reason must be at most 500 characters")
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	var body hubuapi.DenyRequest
	if *reason != "" {
		body.Reason = reason
	}
	resp, err := cl.DenyOperationWithResponse(ctx, handle, body)
	if err := expect(resp, err, (*hubuapi.DenyOperationResponse).GetJSON200); err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(resp.Body)
	}
	op := resp.JSON200
	fmt.Fprintf(c.stdout, "Denied %s; its hold is released.\n\n", op.PublicHandle)
	return writeOperation(c.stdout, op)
}

func (c *cli) operationShow(ctx context.Context, args []string) error {
	const text = `usage: hubuctl operation show HANDLE [--json]`
	fs := c.flagSet("hubuctl operation show")
	pos, err := c.parse(fs, text, args, 1, "one public handle")
	if err != nil {
		return err
	}
	handle, err := parseHandle(pos[0])
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	resp, err := cl.GetOperationWithResponse(ctx, handle)
	if err := expect(resp, err, (*hubuapi.GetOperationResponse).GetJSON200); err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(resp.Body)
	}
	return writeOperation(c.stdout, resp.JSON200)
}

func writeOperation(w io.Writer, op *hubuapi.Operation) error {
	tw := newTable(w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("Handle", clean(op.PublicHandle))
	row("State", string(op.State))
	if op.Denial != nil {
		row("Denial", clean(string(op.Denial.Code)+": "+op.Denial.Message))
	}
	row("Agent", op.AgentId.String())
	row("Account", clean(op.Account))
	row("Tool", clean(string(op.Tool)))
	row("Scope", clean(op.Scope.Provider+" "+op.Scope.Model+" "+op.Scope.Size))
	row("Amount", formatAmount(op.AmountMicros, op.Currency))
	row("Prompt", truncate(clean(op.Arguments.Prompt), 200))
	if op.Arguments.Seed != nil {
		row("Seed", fmt.Sprint(*op.Arguments.Seed))
	}
	if op.DecisionId != nil {
		row("Decision", op.DecisionId.String())
	}
	if op.DecidedBy != nil {
		row("Decided by", clean(*op.DecidedBy))
	}
	// Hubu keeps the expiry after a decision; it only means something while pending.
	if op.ApprovalExpiresAt != nil && op.State == hubuapi.OperationStatePendingApproval {
		row("Approval expires", formatTime(*op.ApprovalExpiresAt))
	}
	row("Held", formatAmount(op.HeldMicros, op.Currency))
	row("Captured", formatAmount(op.CapturedMicros, op.Currency))
	row("Released", formatAmount(op.ReleasedMicros, op.Currency))
	row("Created", formatTime(op.CreatedAt))
	row("Updated", formatTime(op.UpdatedAt))
	return tw.Flush()
}

func (c *cli) ledger(ctx context.Context, args []string) error {
	const text = `usage: hubuctl ledger HANDLE [--json]

Prints the append-only ledger entries (hold, capture, release) of one operation and its totals.`
	fs := c.flagSet("hubuctl ledger")
	pos, err := c.parse(fs, text, args, 1, "one public handle")
	if err != nil {
		return err
	}
	handle, err := parseHandle(pos[0])
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	resp, err := cl.GetOperationLedgerWithResponse(ctx, handle)
	if err := expect(resp, err, (*hubuapi.GetOperationLedgerResponse).GetJSON200); err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(resp.Body)
	}
	return writeLedger(c.stdout, resp.JSON200)
}

func writeLedger(w io.Writer, l *hubuapi.Ledger) error {
	fmt.Fprintf(w, "Operation %s (%s)\n\n", clean(l.PublicHandle), l.State)
	// The totals carry no currency of their own; an operation's entries share one.
	currency := ""
	tw := newTable(w)
	if len(l.Entries) == 0 {
		fmt.Fprintln(tw, "No ledger entries.")
	} else {
		fmt.Fprintln(tw, "ID\tKIND\tAMOUNT\tAT")
		for _, e := range l.Entries {
			currency = e.Currency
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", e.Id, e.Kind, formatAmount(e.AmountMicros, e.Currency), formatTime(e.CreatedAt))
		}
	}
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "Held\t%s\n", formatAmount(l.HeldMicros, currency))
	fmt.Fprintf(tw, "Captured\t%s\n", formatAmount(l.CapturedMicros, currency))
	fmt.Fprintf(tw, "Released\t%s\n", formatAmount(l.ReleasedMicros, currency))
	return tw.Flush()
}

// ---- agents ----

// policyFlags are the optional policy flags of agent create and set-policy.
type policyFlags struct {
	fs                                  *flag.FlagSet
	autoApprove, ceiling, budget        int64
	period, models, providers, currency string
}

func addPolicyFlags(fs *flag.FlagSet) *policyFlags {
	p := &policyFlags{fs: fs}
	fs.Int64Var(&p.autoApprove, "auto-approve-micros", 0, "")
	fs.Int64Var(&p.ceiling, "ceiling-micros", 0, "")
	fs.Int64Var(&p.budget, "budget-micros", 0, "")
	fs.StringVar(&p.period, "period", "", "")
	fs.StringVar(&p.models, "models", "", "")
	fs.StringVar(&p.providers, "providers", "", "")
	fs.StringVar(&p.currency, "currency", "", "")
	return p
}

// defaultPolicy is what Hubu gives an agent created without a policy; partial policy flags
// on agent create start from it.
func defaultPolicy() hubuapi.Policy {
	return hubuapi.Policy{
		Currency:                  "USD",
		PerOperationCeilingMicros: 1_000_000,
		AutoApproveLimitMicros:    50_000,
		BudgetMicros:              5_000_000,
		BudgetPeriod:              hubuapi.PolicyBudgetPeriodDay,
		AllowedProviders:          []string{"*"},
		AllowedModels:             []string{"*"},
	}
}

// apply overrides the fields whose flags were given; it reports whether there were any.
func (p *policyFlags) apply(pol *hubuapi.Policy) (bool, error) {
	name := p.fs.Name()
	var err error
	set := false
	p.fs.Visit(func(f *flag.Flag) {
		if err != nil {
			return
		}
		switch f.Name {
		case "auto-approve-micros", "ceiling-micros", "budget-micros":
			set = true
			v := map[string]int64{"auto-approve-micros": p.autoApprove, "ceiling-micros": p.ceiling, "budget-micros": p.budget}[f.Name]
			if v < 0 {
				err = usagef("%s: --%s must not be negative", name, f.Name)
				return
			}
			switch f.Name {
			case "auto-approve-micros":
				pol.AutoApproveLimitMicros = v
			case "ceiling-micros":
				pol.PerOperationCeilingMicros = v
			default:
				pol.BudgetMicros = v
			}
		case "period":
			set = true
			switch hubuapi.PolicyBudgetPeriod(p.period) {
			case hubuapi.PolicyBudgetPeriodDay, hubuapi.PolicyBudgetPeriodWeek, hubuapi.PolicyBudgetPeriodMonth:
				pol.BudgetPeriod = hubuapi.PolicyBudgetPeriod(p.period)
			default:
				err = usagef("%s: --period must be day, week or month", name)
			}
		case "models":
			set = true
			pol.AllowedModels = splitList(p.models)
		case "providers":
			set = true
			pol.AllowedProviders = splitList(p.providers)
		case "currency":
			set = true
			pol.Currency = strings.ToUpper(strings.TrimSpace(p.currency))
		}
	})
	return set, err
}

// splitList splits a comma-separated flag; an empty value is an empty list (allows none).
func splitList(s string) []string {
	out := []string{}
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

func (c *cli) agentCreate(ctx context.Context, args []string) error {
	const text = `usage: hubuctl agent create --name NAME [--account ACCOUNT] [policy flags] [--json]

Creates an agent and prints its bearer token once: Hubu keeps only its hash.

  --name NAME         lower-case letters, digits, . _ - (required)
  --account ACCOUNT   billing account (default acct:NAME)

Without policy flags the agent gets Hubu's default policy. Policy flags given start from
USD, ceiling 1000000, auto-approve 50000, budget 5000000 per day, models *, providers *.

` + policyFlagsUsage
	fs := c.flagSet("hubuctl agent create")
	name := fs.String("name", "", "")
	account := fs.String("account", "", "")
	pf := addPolicyFlags(fs)
	if _, err := c.parse(fs, text, args, 0, ""); err != nil {
		return err
	}
	if *name == "" {
		return usagef("hubuctl agent create: --name is required (see hubuctl agent create --help)")
	}
	body := hubuapi.AgentCreate{Name: *name}
	if *account != "" {
		body.Account = account
	}
	pol := defaultPolicy()
	set, err := pf.apply(&pol)
	if err != nil {
		return err
	}
	if set {
		body.Policy = &pol
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	resp, err := cl.CreateAgentWithResponse(ctx, body)
	if err := expect(resp, err, (*hubuapi.CreateAgentResponse).GetJSON201); err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(resp.Body)
	}
	created := resp.JSON201
	fmt.Fprintln(c.stdout, "Agent created.")
	fmt.Fprintln(c.stdout)
	if err := writeAgent(c.stdout, &created.Agent); err != nil {
		return err
	}
	fmt.Fprintln(c.stdout)
	fmt.Fprintf(c.stdout, "Token: %s\n", created.Token)
	fmt.Fprintln(c.stdout, "This token will not be shown again: store it now (Hubu keeps only its hash).")
	return nil
}

func (c *cli) agentList(ctx context.Context, args []string) error {
	const text = `usage: hubuctl agent list [--json]`
	fs := c.flagSet("hubuctl agent list")
	if _, err := c.parse(fs, text, args, 0, ""); err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	resp, err := cl.ListAgentsWithResponse(ctx)
	if err := expect(resp, err, (*hubuapi.ListAgentsResponse).GetJSON200); err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(resp.Body)
	}
	agents := resp.JSON200.Agents
	if len(agents) == 0 {
		_, err := fmt.Fprintln(c.stdout, "No agents.")
		return err
	}
	tw := newTable(c.stdout)
	fmt.Fprintln(tw, "ID\tNAME\tACCOUNT\tAUTO-APPROVE\tCEILING\tBUDGET\tMODELS\tPROVIDERS\tCREATED")
	for _, a := range agents {
		p := a.Policy
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s/%s\t%s\t%s\t%s\n",
			a.Id, clean(a.Name), clean(a.Account),
			formatAmount(p.AutoApproveLimitMicros, p.Currency), formatAmount(p.PerOperationCeilingMicros, p.Currency),
			formatAmount(p.BudgetMicros, p.Currency), p.BudgetPeriod,
			formatList(p.AllowedModels), formatList(p.AllowedProviders), formatTime(a.CreatedAt))
	}
	return tw.Flush()
}

func (c *cli) agentShow(ctx context.Context, args []string) error {
	const text = `usage: hubuctl agent show ID [--json]`
	fs := c.flagSet("hubuctl agent show")
	pos, err := c.parse(fs, text, args, 1, "one agent ID")
	if err != nil {
		return err
	}
	id, err := parseAgentID(fs.Name(), pos[0])
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	resp, err := cl.GetAgentWithResponse(ctx, id)
	if err := expect(resp, err, (*hubuapi.GetAgentResponse).GetJSON200); err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(resp.Body)
	}
	return writeAgent(c.stdout, resp.JSON200)
}

func (c *cli) agentSetPolicy(ctx context.Context, args []string) error {
	const text = `usage: hubuctl agent set-policy ID [policy flags] [--json]

Reads the agent's current policy, changes the fields given, and stores it.

` + policyFlagsUsage
	fs := c.flagSet("hubuctl agent set-policy")
	pf := addPolicyFlags(fs)
	pos, err := c.parse(fs, text, args, 1, "one agent ID")
	if err != nil {
		return err
	}
	id, err := parseAgentID(fs.Name(), pos[0])
	if err != nil {
		return err
	}
	// Check the flags before any request; apply them to the real policy below.
	probe := defaultPolicy()
	if set, err := pf.apply(&probe); err != nil {
		return err
	} else if !set {
		return usagef("hubuctl agent set-policy: give at least one policy flag (see hubuctl agent set-policy --help)")
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	cur, err := cl.GetAgentWithResponse(ctx, id)
	if err := expect(cur, err, (*hubuapi.GetAgentResponse).GetJSON200); err != nil {
		return err
	}
	pol := cur.JSON200.Policy
	if _, err := pf.apply(&pol); err != nil {
		return err
	}
	resp, err := cl.SetAgentPolicyWithResponse(ctx, id, pol)
	if err := expect(resp, err, (*hubuapi.SetAgentPolicyResponse).GetJSON200); err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(resp.Body)
	}
	fmt.Fprintln(c.stdout, "Policy updated.")
	fmt.Fprintln(c.stdout)
	return writeAgent(c.stdout, resp.JSON200)
}

func (c *cli) agentSetAccount(ctx context.Context, args []string) error {
	const text = `usage: hubuctl agent set-account ID ACCOUNT [--json]

Moves an agent to another billing account; its new operations are charged there.`
	fs := c.flagSet("hubuctl agent set-account")
	pos, err := c.parse(fs, text, args, 2, "an agent ID and an account")
	if err != nil {
		return err
	}
	id, err := parseAgentID(fs.Name(), pos[0])
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	resp, err := cl.SetAgentAccountWithResponse(ctx, id, hubuapi.AccountUpdate{Account: pos[1]})
	if err := expect(resp, err, (*hubuapi.SetAgentAccountResponse).GetJSON200); err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(resp.Body)
	}
	fmt.Fprintln(c.stdout, "Account updated.")
	fmt.Fprintln(c.stdout)
	return writeAgent(c.stdout, resp.JSON200)
}

func writeAgent(w io.Writer, a *hubuapi.Agent) error {
	p := a.Policy
	tw := newTable(w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("ID", a.Id.String())
	row("Name", clean(a.Name))
	row("Account", clean(a.Account))
	row("Auto-approve up to", formatAmount(p.AutoApproveLimitMicros, p.Currency))
	row("Ceiling", formatAmount(p.PerOperationCeilingMicros, p.Currency)+" per operation")
	row("Budget", formatAmount(p.BudgetMicros, p.Currency)+" per "+clean(string(p.BudgetPeriod)))
	row("Models", formatList(p.AllowedModels))
	row("Providers", formatList(p.AllowedProviders))
	row("Created", formatTime(a.CreatedAt))
	return tw.Flush()
}

// ---- prices ----

func (c *cli) pricesList(ctx context.Context, args []string) error {
	const text = `usage: hubuctl prices list [--json]`
	fs := c.flagSet("hubuctl prices list")
	if _, err := c.parse(fs, text, args, 0, ""); err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	resp, err := cl.ListPricesWithResponse(ctx)
	if err := expect(resp, err, (*hubuapi.ListPricesResponse).GetJSON200); err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(resp.Body)
	}
	return writePrices(c.stdout, resp.JSON200.Prices)
}

func writePrices(w io.Writer, prices []hubuapi.Price) error {
	if len(prices) == 0 {
		_, err := fmt.Fprintln(w, "The price catalog is empty.")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "PROVIDER\tMODEL\tSIZE\tAMOUNT\tUPDATED")
	for _, p := range prices {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", clean(p.Provider), clean(p.Model), clean(p.Size), formatAmount(p.AmountMicros, p.Currency), formatTime(p.UpdatedAt))
	}
	return tw.Flush()
}

func (c *cli) pricesSet(ctx context.Context, args []string) error {
	const text = `usage: hubuctl prices set --provider P --model M --size S --amount-micros N [--currency USD] [--json]

Creates or changes one catalog entry. Operations already authorized keep their amount.

  --provider P        provider name, e.g. bfl (required)
  --model M           model name, e.g. flux-dev (required)
  --size S            WIDTHxHEIGHT, or '*' for any size without an entry of its own (required)
  --amount-micros N   price in micro-units, 25000 = 0.025 (required)
  --currency CODE     ISO 4217 code (default USD)`
	fs := c.flagSet("hubuctl prices set")
	provider := fs.String("provider", "", "")
	model := fs.String("model", "", "")
	size := fs.String("size", "", "")
	amount := fs.Int64("amount-micros", 0, "")
	currency := fs.String("currency", "USD", "")
	if _, err := c.parse(fs, text, args, 0, ""); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, req := range []string{"provider", "model", "size", "amount-micros"} {
		if !given[req] {
			return usagef("hubuctl prices set: --%s is required (see hubuctl prices set --help)", req)
		}
	}
	if *amount < 0 {
		return usagef("hubuctl prices set: --amount-micros must not be negative")
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	resp, err := cl.SetPriceWithResponse(ctx, hubuapi.PriceUpdate{
		Provider: *provider, Model: *model, Size: *size, AmountMicros: *amount,
		Currency: strings.ToUpper(strings.TrimSpace(*currency)),
	})
	if err := expect(resp, err, (*hubuapi.SetPriceResponse).GetJSON200); err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(resp.Body)
	}
	fmt.Fprintln(c.stdout, "Price set.")
	fmt.Fprintln(c.stdout)
	return writePrices(c.stdout, []hubuapi.Price{*resp.JSON200})
}

// ---- arguments and formatting ----

func parseHandle(s string) (string, error) {
	if !publicHandleRE.MatchString(s) {
		return "", usagef("%q is not a public handle (hubu:public-operation:v1:<uuid>)", truncate(clean(s), 80))
	}
	return s, nil
}

func parseAgentID(cmd, s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil || len(s) != 36 {
		return uuid.UUID{}, usagef("%s: %q is not an agent ID (a UUID)", cmd, truncate(clean(s), 80))
	}
	return id, nil
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// formatAmount renders micro-units as a decimal amount with at least two decimals and no
// trailing zeros beyond them: 25000 USD is "USD 0.025", 1000000 is "USD 1.00".
func formatAmount(micros int64, currency string) string {
	sign := ""
	u := uint64(micros)
	if micros < 0 {
		sign, u = "-", uint64(-(micros+1))+1 // also right for math.MinInt64
	}
	frac := strings.TrimRight(fmt.Sprintf("%06d", u%1_000_000), "0")
	for len(frac) < 2 {
		frac += "0"
	}
	s := fmt.Sprintf("%s%d.%s", sign, u/1_000_000, frac)
	if currency == "" {
		return s
	}
	return clean(currency) + " " + s
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func formatTimePtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return formatTime(*t)
}

func formatList(items []string) string {
	if len(items) == 0 {
		return "(none)"
	}
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = clean(s)
	}
	return strings.Join(out, ",")
}

// clean makes text from the server safe for one table cell on a terminal: prompts are
// model-written, so control characters (escape sequences, tabs, newlines) and invisible
// format characters (bidirectional overrides) become spaces, and runs of space collapse.
func clean(s string) string {
	var b strings.Builder
	space := false
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.IsSpace(r) {
			if !space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		space = false
		b.WriteRune(r)
	}
	return strings.TrimRight(b.String(), " ")
}

// truncate shortens s to at most n runes, marking the cut with an ellipsis.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// oneLine keeps an error message on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
