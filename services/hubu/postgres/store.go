package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/credential"
	"hubu.dev/hubu/services/hubu/policy"
	"hubu.dev/hubu/sql/hubu/hubudb"
)

// Store is Hubu's PostgreSQL storage. Its methods return *hubu.Error for anything the
// caller did wrong; any other error is internal.
type Store struct {
	pool *pgxpool.Pool
	db   hubudb.DBTX // pool, with the queries' arguments through pgArgs
	q    *hubudb.Queries
	// ApprovalTTL is how long a held operation waits for a human before it expires.
	ApprovalTTL time.Duration
	// Cache, when set, keeps credentials and prices between requests (see Cache). Set it
	// before the Store is used; nil reads them from Postgres every time.
	Cache *Cache

	// testHookDecided, when set, runs between Authorize's first read of the state and its
	// write: tests move the state there.
	testHookDecided func()
}

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool, approvalTTL time.Duration) *Store {
	return &Store{pool: pool, db: argsDB{pool}, q: hubudb.New(), ApprovalTTL: approvalTTL}
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// Authenticate returns the principal a bearer token belongs to, refusing a token that is
// unknown, revoked, or expired at now. A revocation takes effect on its holder's next request:
// every request looks the credential up again, in Postgres or in a Cache that the revocation
// emptied (at once in the process that revoked, on its notification in the others).
func (s *Store) Authenticate(ctx context.Context, token string, now time.Time) (hubu.Principal, error) {
	return s.AuthenticateHash(ctx, credential.Hash(token), now)
}

// AuthenticateHash is Authenticate for a token known only by its hash (credential.Hash):
// the console keeps the hash, never the token, to see a revoked credential at once.
func (s *Store) AuthenticateHash(ctx context.Context, tokenHash []byte, now time.Time) (hubu.Principal, error) {
	c, err := load(s.Cache, s.Cache.credentialEntries(), string(tokenHash), func() (hubudb.Credential, error) {
		return s.q.GetCredentialByHash(ctx, s.db, tokenHash)
	})
	if err != nil {
		return hubu.Principal{}, queryError(err, "look up credential", hubu.Errorf(hubu.CodeUnauthorized, "the bearer token is not valid"))
	}
	if err := (hubu.Credential{ID: c.ID, RevokedAt: c.RevokedAt, ExpiresAt: c.ExpiresAt}).Authenticates(now); err != nil {
		return hubu.Principal{}, err
	}
	p := hubu.Principal{Role: hubu.Role(c.Kind), Name: c.Name, CredentialID: c.ID}
	if c.AgentID != nil {
		p.AgentID = *c.AgentID
	}
	return p, nil
}

// CreateCredential makes an operator or service token and returns it; only its hash is kept.
func (s *Store) CreateCredential(ctx context.Context, role hubu.Role, name string, now time.Time) (string, error) {
	if role != hubu.RoleOperator && role != hubu.RoleService && role != hubu.RoleRouter {
		return "", hubu.Errorf(hubu.CodeInvalidArguments, "credentials of role %q are made with their agent", role)
	}
	if name == "" {
		return "", hubu.Errorf(hubu.CodeInvalidArguments, "a credential needs a name")
	}
	token := credential.New(tokenPrefix[role])
	defer s.Cache.credentialsChanged()
	err := s.q.InsertCredential(ctx, s.db, hubudb.InsertCredentialParams{
		ID: uuid.New(), TokenHash: credential.Hash(token), Kind: string(role), Name: name, CreatedAt: now,
	})
	if err != nil {
		return "", fmt.Errorf("insert credential: %w", err)
	}
	return token, nil
}

// CreateAgent makes an agent, its policy and its token in one transaction.
func (s *Store) CreateAgent(ctx context.Context, name, account string, pol hubu.Policy, now time.Time) (hubu.Agent, string, error) {
	token := credential.New(credential.PrefixAgent)
	defer s.Cache.credentialsChanged()
	agent, err := withTxV(ctx, s.pool, func(tx hubudb.DBTX) (hubu.Agent, error) {
		a, err := s.q.InsertAgent(ctx, tx, hubudb.InsertAgentParams{ID: uuid.New(), Name: name, Account: account, CreatedAt: now})
		if uniqueViolation(err, "agents_name_key") {
			return hubu.Agent{}, hubu.Errorf(hubu.CodeConflict, "an agent named %q exists already", name)
		}
		if err != nil {
			return hubu.Agent{}, fmt.Errorf("insert agent: %w", err)
		}
		p, err := s.q.UpsertPolicy(ctx, tx, policyParams(a.ID, pol, now))
		if err != nil {
			return hubu.Agent{}, fmt.Errorf("insert policy: %w", err)
		}
		err = s.q.InsertCredential(ctx, tx, hubudb.InsertCredentialParams{
			ID: uuid.New(), TokenHash: credential.Hash(token), Kind: string(hubu.RoleAgent), Name: name, AgentID: &a.ID, CreatedAt: now,
		})
		if err != nil {
			return hubu.Agent{}, fmt.Errorf("insert agent credential: %w", err)
		}
		return agentOf(a, p), nil
	})
	if err != nil {
		return hubu.Agent{}, "", err
	}
	return agent, token, nil
}

// GetAgent returns one agent.
func (s *Store) GetAgent(ctx context.Context, id uuid.UUID) (hubu.Agent, error) {
	a, err := s.q.GetAgent(ctx, s.db, id)
	if err != nil {
		return hubu.Agent{}, queryError(err, "get agent", hubu.Errorf(hubu.CodeNotFound, "no agent %s", id))
	}
	p, err := s.q.GetPolicy(ctx, s.db, id)
	if err != nil {
		return hubu.Agent{}, fmt.Errorf("get policy: %w", err)
	}
	return agentOf(a, p), nil
}

// ListAgents returns every agent, by name.
func (s *Store) ListAgents(ctx context.Context) ([]hubu.Agent, error) {
	agents, err := s.q.ListAgents(ctx, s.db)
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	policies, err := s.q.ListPolicies(ctx, s.db)
	if err != nil {
		return nil, fmt.Errorf("list policies: %w", err)
	}
	byAgent := make(map[uuid.UUID]hubudb.Policy, len(policies))
	for _, p := range policies {
		byAgent[p.AgentID] = p
	}
	return each(agents, func(a hubudb.Agent) hubu.Agent { return agentOf(a, byAgent[a.ID]) }), nil
}

// SetPolicy replaces an agent's policy. Operations already recorded keep their decisions.
// The budget currency cannot change once the agent has operations: their amounts would be
// summed with the new currency's.
func (s *Store) SetPolicy(ctx context.Context, id uuid.UUID, pol hubu.Policy, now time.Time) (hubu.Agent, error) {
	current, err := s.GetAgent(ctx, id)
	if err != nil {
		return hubu.Agent{}, err
	}
	if pol.Currency != current.Policy.Currency {
		has, err := s.q.AgentHasOperations(ctx, s.db, id)
		if err != nil {
			return hubu.Agent{}, fmt.Errorf("check operations: %w", err)
		}
		if has {
			return hubu.Agent{}, hubu.Errorf(hubu.CodeConflict, "the agent has operations in %s; create a new agent for another currency", current.Policy.Currency)
		}
	}
	if _, err := s.q.UpsertPolicy(ctx, s.db, policyParams(id, pol, now)); err != nil {
		return hubu.Agent{}, fmt.Errorf("set policy: %w", err)
	}
	return s.GetAgent(ctx, id)
}

// SetAccount moves an agent to another billing account.
func (s *Store) SetAccount(ctx context.Context, id uuid.UUID, account string) (hubu.Agent, error) {
	if _, err := s.q.SetAgentAccount(ctx, s.db, hubudb.SetAgentAccountParams{ID: id, Account: account}); err != nil {
		return hubu.Agent{}, queryError(err, "set account", hubu.Errorf(hubu.CodeNotFound, "no agent %s", id))
	}
	return s.GetAgent(ctx, id)
}

// ListPrices returns the catalog.
func (s *Store) ListPrices(ctx context.Context) ([]hubu.Price, error) {
	c, err := s.catalog(ctx, s.db)
	return slices.Clone(c), err // the cached catalog is shared
}

// catalog is the price list, from the Cache when it has it, else read on db.
func (s *Store) catalog(ctx context.Context, db hubudb.DBTX) (hubu.Catalog, error) {
	return load(s.Cache, s.Cache.priceEntries(), struct{}{}, func() (hubu.Catalog, error) {
		rows, err := s.q.ListPrices(ctx, db)
		if err != nil {
			return nil, fmt.Errorf("list prices: %w", err)
		}
		return each(rows, priceOf), nil
	})
}

// SetPrice creates or changes one catalog entry. Operations already recorded keep the
// amount they were authorized for.
func (s *Store) SetPrice(ctx context.Context, p hubu.Price, now time.Time) (hubu.Price, error) {
	defer s.Cache.pricesChanged()
	params := hubudb.UpsertPriceParams{
		Provider: p.Provider, Model: p.Model, Size: p.Size, Rule: p.Rule, AmountMicros: p.AmountMicros, Currency: p.Currency, UpdatedAt: now,
	}
	if p.Rule == hubu.PriceMegapixel {
		params.ExtraMpMicros, params.InputMpMicros = &p.ExtraMPMicros, &p.InputMPMicros
	}
	r, err := s.q.UpsertPrice(ctx, s.db, params)
	if err != nil {
		return hubu.Price{}, fmt.Errorf("set price: %w", err)
	}
	return priceOf(r), nil
}

// price computes what a scope costs from the catalog (read on db unless cached), with an
// edit's input images; the request never names an amount.
func (s *Store) price(ctx context.Context, db hubudb.DBTX, scope hubu.Scope, inputs []contract.Dimensions) (amount int64, currency string, err error) {
	c, err := s.catalog(ctx, db)
	if err != nil {
		return 0, "", err
	}
	p, err := c.PriceOf(scope)
	if err != nil {
		return 0, "", err
	}
	amount, err = p.AmountFor(scope.Size, inputs)
	return amount, p.Currency, err
}

// Capabilities returns what an agent may do now: the prices its policy allows (a held price
// is listed; one above the ceiling is not) and its budget, after closing expired holds.
func (s *Store) Capabilities(ctx context.Context, agentID uuid.UUID, now time.Time) (hubu.Capabilities, error) {
	if _, err := s.ExpireApprovals(ctx, now, 1000); err != nil {
		return hubu.Capabilities{}, err
	}
	agent, err := s.GetAgent(ctx, agentID)
	if err != nil {
		return hubu.Capabilities{}, err
	}
	all, err := s.ListPrices(ctx)
	if err != nil {
		return hubu.Capabilities{}, err
	}
	var prices []hubu.Price
	for _, p := range all {
		v := policy.Decide(agent.Policy, hubu.Scope{Provider: p.Provider, Model: p.Model}, p.AmountMicros, p.Currency, 0)
		if v.Action != policy.Deny {
			prices = append(prices, p)
		}
	}
	budget, err := s.budget(ctx, agent, now)
	if err != nil {
		return hubu.Capabilities{}, err
	}
	return hubu.Capabilities{Agent: agent, Prices: prices, Budget: budget}, nil
}

func policyParams(agentID uuid.UUID, p hubu.Policy, now time.Time) hubudb.UpsertPolicyParams {
	return hubudb.UpsertPolicyParams{
		AgentID: agentID, Currency: p.Currency, PerOperationCeilingMicros: p.PerOperationCeilingMicros,
		AutoApproveLimitMicros: p.AutoApproveLimitMicros, BudgetMicros: p.BudgetMicros, BudgetPeriod: p.BudgetPeriod,
		AllowedProviders: nonNil(p.AllowedProviders), AllowedModels: nonNil(p.AllowedModels), UpdatedAt: now,
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func agentOf(a hubudb.Agent, p hubudb.Policy) hubu.Agent {
	agent := hubu.Agent{ID: a.ID, Name: a.Name, Account: a.Account, CreatedAt: a.CreatedAt, Policy: policyOfRow(p)}
	if a.OwnerEmail != nil {
		agent.OwnerEmail = *a.OwnerEmail
	}
	return agent
}

func priceOf(r hubudb.Price) hubu.Price {
	p := hubu.Price{Provider: r.Provider, Model: r.Model, Size: r.Size, Rule: r.Rule, AmountMicros: r.AmountMicros, Currency: r.Currency, UpdatedAt: r.UpdatedAt}
	if r.ExtraMpMicros != nil && r.InputMpMicros != nil {
		p.ExtraMPMicros, p.InputMPMicros = *r.ExtraMpMicros, *r.InputMpMicros
	}
	return p
}

func policyOfRow(p hubudb.Policy) hubu.Policy {
	return hubu.Policy{
		Currency: p.Currency, PerOperationCeilingMicros: p.PerOperationCeilingMicros,
		AutoApproveLimitMicros: p.AutoApproveLimitMicros, BudgetMicros: p.BudgetMicros,
		BudgetPeriod: p.BudgetPeriod, AllowedProviders: p.AllowedProviders, AllowedModels: p.AllowedModels,
	}
}

// marshalArguments stores the validated request, not the bytes the caller sent.
func marshalArguments(r hubu.ImageRequest) ([]byte, error) { return json.Marshal(r) }
