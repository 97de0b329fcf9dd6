package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/google/uuid"

	"hubu.dev/hubu/proto/hubuapi"
)

const policyFlagsUsage = `policy flags (amounts in micro-units, 1000000 = 1.00):
  --auto-approve-micros N   above this an operation waits for a human
  --ceiling-micros N        above this an operation is denied
  --budget-micros N         holds and captures allowed per period
  --period day|week|month   the budget period (UTC calendar periods)
  --models a,b              allowed models, * for all, '' for none
  --providers p,q           allowed providers, * for all, '' for none
  --currency CODE           ISO 4217 code such as USD`

var agentCommand = &command{UsageLine: "agent", Commands: []*command{
	{UsageLine: "create --name NAME [--account ACCOUNT] [policy flags]", Listed: "create --name NAME [...]",
		Short: "create an agent; prints its token once", Run: (*cli).agentCreate,
		Long: `Creates an agent and prints its bearer token once: Hubu keeps only its hash.

  --name NAME         lower-case letters, digits, . _ - (required)
  --account ACCOUNT   billing account (default acct:NAME)

Without policy flags the agent gets Hubu's default policy. Policy flags given start from
USD, ceiling 1000000, auto-approve 50000, budget 5000000 per day, models *, providers *.

` + policyFlagsUsage},
	{UsageLine: "list", Short: "all agents", Run: (*cli).agentList},
	{UsageLine: "show ID", Short: "one agent and its policy", Run: (*cli).agentShow},
	{UsageLine: "set-policy ID [policy flags]", Listed: "set-policy ID [...]",
		Short: "change some of an agent's policy", Run: (*cli).agentSetPolicy,
		Long: `Reads the agent's current policy, changes the fields given, and stores it.

` + policyFlagsUsage},
	{UsageLine: "set-account ID ACCOUNT", Short: "move an agent to another billing account", Run: (*cli).agentSetAccount,
		Long: `Moves an agent to another billing account; its new operations are charged there.`},
}}

func (c *cli) agentCreate(ctx context.Context, fs *flag.FlagSet, args []string) error {
	name := fs.String("name", "", "")
	account := fs.String("account", "", "")
	pf := addPolicyFlags(fs)
	if _, err := c.parse(fs, args, 0, ""); err != nil {
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
	return show(c, resp, err, (*hubuapi.CreateAgentResponse).GetJSON201, func(created *hubuapi.AgentCreated) error {
		fmt.Fprint(c.stdout, "Agent created.\n\n")
		if err := writeAgent(c.stdout, &created.Agent); err != nil {
			return err
		}
		printToken(c.stdout, created.Token)
		return nil
	})
}

func (c *cli) agentList(ctx context.Context, fs *flag.FlagSet, args []string) error {
	if _, err := c.parse(fs, args, 0, ""); err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	resp, err := cl.ListAgentsWithResponse(ctx)
	return show(c, resp, err, (*hubuapi.ListAgentsResponse).GetJSON200, func(l *hubuapi.AgentList) error {
		return writeAgents(c.stdout, l.Agents)
	})
}

func writeAgents(w io.Writer, agents []hubuapi.Agent) error {
	if len(agents) == 0 {
		_, err := fmt.Fprintln(w, "No agents.")
		return err
	}
	tw := newTable(w)
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

func (c *cli) agentShow(ctx context.Context, fs *flag.FlagSet, args []string) error {
	id, err := c.idArg(fs, args, "one agent ID", parseAgentID)
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	resp, err := cl.GetAgentWithResponse(ctx, id)
	return show(c, resp, err, (*hubuapi.GetAgentResponse).GetJSON200, func(a *hubuapi.Agent) error { return writeAgent(c.stdout, a) })
}

func (c *cli) agentSetPolicy(ctx context.Context, fs *flag.FlagSet, args []string) error {
	pf := addPolicyFlags(fs)
	id, err := c.idArg(fs, args, "one agent ID", parseAgentID)
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
	return show(c, resp, err, (*hubuapi.SetAgentPolicyResponse).GetJSON200, func(a *hubuapi.Agent) error {
		fmt.Fprint(c.stdout, "Policy updated.\n\n")
		return writeAgent(c.stdout, a)
	})
}

func (c *cli) agentSetAccount(ctx context.Context, fs *flag.FlagSet, args []string) error {
	pos, err := c.parse(fs, args, 2, "an agent ID and an account")
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
	return show(c, resp, err, (*hubuapi.SetAgentAccountResponse).GetJSON200, func(a *hubuapi.Agent) error {
		fmt.Fprint(c.stdout, "Account updated.\n\n")
		return writeAgent(c.stdout, a)
	})
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

func parseAgentID(cmd, s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil || len(s) != 36 {
		return uuid.UUID{}, usagef("%s: %q is not an agent ID (a UUID)", cmd, truncate(clean(s), 80))
	}
	return id, nil
}
