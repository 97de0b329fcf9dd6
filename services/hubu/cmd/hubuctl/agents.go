package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

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
	{UsageLine: "create --name NAME [--account ACCOUNT] [--email EMAIL] [policy flags]", Listed: "create --name NAME [...]",
		Short: "create an agent; prints its token once", Run: (*cli).agentCreate,
		Long: `Creates an agent and prints its bearer token once: Hubu keeps only its hash.

  --name NAME         lower-case letters, digits, . _ - (required)
  --account ACCOUNT   billing account (default acct:NAME)
  --email EMAIL       the agent's person, for OpenID Connect sign-in (see set-email)

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
	{UsageLine: "set-email ID EMAIL", Short: "name the agent's person, for OpenID Connect sign-in", Run: (*cli).agentSetEmail,
		Long: `Names the person the agent belongs to by their email address. When Hubu signs people in through
the team's OpenID Connect provider (hubu serve --oidc-issuer), a person whose verified address is
EMAIL signs in as this agent. Addresses are compared without case; one address names one agent.

  --clear   remove the agent's email (as does an empty EMAIL, '')`},
	{UsageLine: "invite ID [--ttl DURATION]", Listed: "invite ID [--ttl D]",
		Short: "a one-time sign-in code for the agent's person", Run: (*cli).agentInvite,
		Long: `Issues a one-time sign-in code (hubu_inv_…) for the agent. When a client such as ChatGPT or
Claude connects to a router in OAuth mode, the person enters it on Hubu's sign-in page, then
allows the client: the grant acts as this agent ('hubuctl credentials list' shows it).

  --ttl DURATION   how long the code can be used, such as 1h or 72h (default 24h; from 1m
                   to 168h)

The code is printed alone on the last line (scripts: | tail -n1), once: Hubu keeps only its
hash. It works once, and whoever enters it first signs in as the agent: send it to the person
privately. With --json: {"code": …, "agent_id": …, "expires_at": …}.`},
}}

// defaultInviteTTL is how long an invite code works unless --ttl says otherwise (Hubu's own
// default too); the API takes 60 to 604800 seconds.
const (
	defaultInviteTTL = 24 * time.Hour
	minInviteTTL     = time.Minute
	maxInviteTTL     = 7 * 24 * time.Hour
)

func (c *cli) agentCreate(ctx context.Context, fs *flag.FlagSet, args []string) error {
	name := fs.String("name", "", "")
	account := fs.String("account", "", "")
	email := fs.String("email", "", "")
	pf := addPolicyFlags(fs)
	if _, err := c.parse(fs, args, 0, ""); err != nil {
		return err
	}
	if *name == "" {
		return usagef("hubuctl agent create: --name is required (see hubuctl agent create --help)")
	}
	if err := checkEmail(fs.Name(), *email); err != nil {
		return err
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
	if *email == "" {
		return show(c, resp, err, (*hubuapi.CreateAgentResponse).GetJSON201, func(created *hubuapi.AgentCreated) error {
			return c.writeCreated(created)
		})
	}
	if err := expect(resp, err, (*hubuapi.CreateAgentResponse).GetJSON201); err != nil {
		return err
	}
	// The agent exists now and its token is in hand: whatever happens to the email, the
	// token is printed, and a refused email is reported after it.
	created := *resp.JSON201
	owner, err := cl.SetAgentOwnerWithResponse(ctx, created.Agent.Id, hubuapi.OwnerUpdate{Email: *email})
	ownerErr := expect(owner, err, (*hubuapi.SetAgentOwnerResponse).GetJSON200)
	if ownerErr == nil {
		created.Agent = *owner.JSON200
	} else {
		ownerErr = fmt.Errorf("the agent was created, but its email was not set (try hubuctl agent set-email %s EMAIL): %w", created.Agent.Id, ownerErr)
	}
	if c.jsonOut {
		b, err := json.Marshal(created)
		if err != nil {
			return err
		}
		if err := c.printJSON(b); err != nil {
			return err
		}
	} else if err := c.writeCreated(&created); err != nil {
		return err
	}
	return ownerErr
}

func (c *cli) writeCreated(created *hubuapi.AgentCreated) error {
	fmt.Fprint(c.stdout, "Agent created.\n\n")
	if err := writeAgent(c.stdout, &created.Agent); err != nil {
		return err
	}
	printToken(c.stdout, created.Token)
	return nil
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
	fmt.Fprintln(tw, "ID\tNAME\tACCOUNT\tAUTO-APPROVE\tCEILING\tBUDGET\tMODELS\tPROVIDERS\tCREATED\tEMAIL")
	for _, a := range agents {
		p := a.Policy
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s/%s\t%s\t%s\t%s\t%s\n",
			a.Id, clean(a.Name), clean(a.Account),
			formatAmount(p.AutoApproveLimitMicros, p.Currency), formatAmount(p.PerOperationCeilingMicros, p.Currency),
			formatAmount(p.BudgetMicros, p.Currency), p.BudgetPeriod,
			formatList(p.AllowedModels), formatList(p.AllowedProviders), formatTime(a.CreatedAt), optional(a.OwnerEmail))
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

func (c *cli) agentSetEmail(ctx context.Context, fs *flag.FlagSet, args []string) error {
	remove := fs.Bool("clear", false, "")
	pos, err := c.parseRange(fs, args, 1, 2, "an agent ID and an email (or --clear)")
	if err != nil {
		return err
	}
	id, err := parseAgentID(fs.Name(), pos[0])
	if err != nil {
		return err
	}
	var email string
	switch {
	case *remove && len(pos) == 2:
		return usagef("%s: give an email or --clear, not both (see %s --help)", fs.Name(), fs.Name())
	case !*remove && len(pos) == 1:
		return usagef("%s: needs an agent ID and an email (or --clear) (see %s --help)", fs.Name(), fs.Name())
	case len(pos) == 2:
		email = strings.TrimSpace(pos[1])
	}
	if err := checkEmail(fs.Name(), email); err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	resp, err := cl.SetAgentOwnerWithResponse(ctx, id, hubuapi.OwnerUpdate{Email: email})
	return show(c, resp, err, (*hubuapi.SetAgentOwnerResponse).GetJSON200, func(a *hubuapi.Agent) error {
		if email == "" {
			fmt.Fprint(c.stdout, "Email removed: no one signs in as this agent through OpenID Connect.\n\n")
		} else {
			fmt.Fprint(c.stdout, "Email set.\n\n")
		}
		return writeAgent(c.stdout, a)
	})
}

// checkEmail refuses what cannot be an email address before any request (Hubu checks too):
// agent create would otherwise make the agent and then fail to set its email.
func checkEmail(cmd, email string) error {
	if email == "" {
		return nil
	}
	at := strings.LastIndexByte(email, '@')
	if at <= 0 || at == len(email)-1 || len(email) > 320 || strings.ContainsFunc(email, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return usagef("%s: %q is not an email address", cmd, truncate(clean(email), 80))
	}
	return nil
}

func (c *cli) agentInvite(ctx context.Context, fs *flag.FlagSet, args []string) error {
	ttl := fs.Duration("ttl", defaultInviteTTL, "")
	id, err := c.idArg(fs, args, "one agent ID", parseAgentID)
	if err != nil {
		return err
	}
	if *ttl < minInviteTTL || *ttl > maxInviteTTL || *ttl%time.Second != 0 {
		return usagef("%s: --ttl must be whole seconds from 1m to 168h", fs.Name())
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	seconds := int(*ttl / time.Second)
	resp, err := cl.CreateInviteWithResponse(ctx, id, hubuapi.InviteCreate{TtlSeconds: &seconds})
	return show(c, resp, err, (*hubuapi.CreateInviteResponse).GetJSON201, func(inv *hubuapi.Invite) error {
		return writeInvite(c.stdout, inv)
	})
}

// writeInvite explains the code and ends with it alone on a line, for tail -n1.
func writeInvite(w io.Writer, inv *hubuapi.Invite) error {
	_, err := fmt.Fprintf(w, "Sign-in code for agent %s, for one sign-in until %s.\n"+
		"Send it to the agent's person privately: whoever enters it first signs in as the agent.\n"+
		"It will not be shown again (Hubu keeps only its hash).\n\n%s\n",
		inv.AgentId, formatTime(inv.ExpiresAt), clean(inv.Code))
	return err
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
	if a.OwnerEmail != nil {
		row("Email", optional(a.OwnerEmail))
	}
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
		return uuid.UUID{}, usagef("%s: %q is not an agent ID (a UUID; see hubuctl agent list)", cmd, truncate(clean(s), 80))
	}
	return id, nil
}
