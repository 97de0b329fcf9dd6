package gongbutest

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/proto/decisionsig"
	"hubu.dev/hubu/services/gongbu"
)

// Report is one outcome Gongbu told the Authority.
type Report struct {
	DecisionID uuid.UUID
	Settled    bool // Settle; otherwise Release
	Amount     int64
	Failed     bool // a Settle of a failed execution
	Reason     string
	// ProviderCost is what the provider stated the job cost, as the Settle reported it.
	ProviderCost *int64
}

// Authority is a fake Hubu: it knows the decisions it was given, and counts reports.
type Authority struct {
	mu         sync.Mutex
	decisions  map[uuid.UUID]authorityEntry
	owners     map[string]string // public handle -> agent token
	down       bool
	reportDown bool
	refuse     map[uuid.UUID]bool // decisions whose reports fail
	reports    []Report
	failed     int // reports refused while down
	asked      int
	keyReads   int
	keys       []ed25519.PrivateKey // the keys it lists; the last signs (Sign, SignRead)
	onDecision func()               // called after each decision look-up, outside the lock
	onOwns     func()               // called before each ownership check answers, outside the lock
}

type authorityEntry struct {
	d        gongbu.Decision
	state    string
	issuedAt time.Time
}

// NewAuthority returns a fake Hubu that knows no decision.
func NewAuthority() *Authority {
	_, key, _ := ed25519.GenerateKey(nil)
	return &Authority{decisions: map[uuid.UUID]authorityEntry{}, owners: map[string]string{}, keys: []ed25519.PrivateKey{key}}
}

// NewKey makes the fake sign with a new key from now on, listing it beside the old ones, as
// Hubu would after making another; with retire, the old ones are no longer listed.
func (a *Authority) NewKey(retire bool) {
	_, key, _ := ed25519.GenerateKey(nil)
	under(&a.mu, func() {
		if retire {
			a.keys = nil
		}
		a.keys = append(a.keys, key)
	})
}

func (a *Authority) key() ed25519.PrivateKey {
	return locked(&a.mu, func() ed25519.PrivateKey { return a.keys[len(a.keys)-1] })
}

// Sign returns the fake's signature of a decision it knows, as Hubu sends it with a hand-off:
// its state and issue time as the fake holds them, valid until expires.
func (a *Authority) Sign(id uuid.UUID, expires time.Time) string {
	a.mu.Lock()
	e, ok := a.decisions[id]
	a.mu.Unlock()
	if !ok {
		panic(fmt.Sprintf("gongbutest: Sign of decision %s, which the fake never issued", id))
	}
	return a.SignAs(e.d, e.state, e.issuedAt, expires)
}

// SignAs returns the fake's signature of any decision, in any state: what Hubu's key would
// sign if Hubu said so.
func (a *Authority) SignAs(d gongbu.Decision, state string, issuedAt, expires time.Time) string {
	args, err := json.Marshal(d.Arguments)
	if err != nil {
		panic(err)
	}
	sig, err := decisionsig.Sign(a.key(), decisionsig.Claims{
		DecisionID: d.DecisionID, PublicHandle: d.PublicHandle, AgentID: d.AgentID, Tool: d.Tool,
		Scope:     decisionsig.Scope{Provider: d.Scope.Provider, Model: d.Scope.Model, Size: d.Scope.Size},
		Arguments: args, AmountMicros: d.AmountMicros, Currency: d.Currency, State: state, IssuedAt: issuedAt,
		Audience: decisionsig.Audience, ExpiresAt: expires,
	})
	if err != nil {
		panic(err)
	}
	return sig
}

// SignRead returns the fake's read capability for the operation of handle, for the credential
// token (with grant, "" for none), valid until expires: what Hubu sends with an authorization.
func (a *Authority) SignRead(handle, token, grant string, expires time.Time) string {
	c, err := decisionsig.SignRead(a.key(), decisionsig.ReadClaims{PublicHandle: handle, Credential: decisionsig.CredentialHash(token),
		Grant: grant, Audience: decisionsig.Audience, ExpiresAt: expires})
	if err != nil {
		panic(err)
	}
	return c
}

// KeyReads is how many times Gongbu read the fake's decision keys.
func (a *Authority) KeyReads() int { return locked(&a.mu, func() int { return a.keyReads }) }

func (a *Authority) DecisionKeys(context.Context) ([]decisionsig.Key, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.keyReads++
	if a.down {
		return nil, ErrDown
	}
	keys := make([]decisionsig.Key, len(a.keys))
	for i, k := range a.keys {
		pub := k.Public().(ed25519.PublicKey)
		keys[i] = decisionsig.Key{ID: decisionsig.KeyID(pub), Public: pub}
	}
	return keys, nil
}

// Issue makes the fake know a decision in an operation state, issued now, and the agent token
// that owns it.
func (a *Authority) Issue(d gongbu.Decision, state, agentToken string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.decisions[d.DecisionID] = authorityEntry{d: d, state: state, issuedAt: time.Now()}
	a.owners[d.PublicHandle] = agentToken
}

// SetIssuedAt sets when a known decision was issued.
func (a *Authority) SetIssuedAt(id uuid.UUID, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.decisions[id]
	e.issuedAt = at
	a.decisions[id] = e
}

// FailReportsFor makes Settle and Release fail for these decisions.
func (a *Authority) FailReportsFor(ids ...uuid.UUID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refuse == nil {
		a.refuse = map[uuid.UUID]bool{}
	}
	for _, id := range ids {
		a.refuse[id] = true
	}
}

// SetDown makes every call fail (true) or succeed (false).
func (a *Authority) SetDown(down bool) { under(&a.mu, func() { a.down = down }) }

// SetReportsDown makes Settle and Release fail (true) or succeed (false); decisions can
// still be looked up.
func (a *Authority) SetReportsDown(down bool) { under(&a.mu, func() { a.reportDown = down }) }

// OnDecision makes every decision look-up call f after it has its answer, as a caller whose
// context ends right then would see it.
func (a *Authority) OnDecision(f func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.onDecision = f
}

// OnOwns makes every ownership check call f before it answers, as a Hubu that is slow to
// answer would.
func (a *Authority) OnOwns(f func()) { under(&a.mu, func() { a.onOwns = f }) }

// Reports returns the successful reports, in order.
func (a *Authority) Reports() []Report {
	return locked(&a.mu, func() []Report { return append([]Report(nil), a.reports...) })
}

// FailedReports is how many reports were refused while the fake was down.
func (a *Authority) FailedReports() int { return locked(&a.mu, func() int { return a.failed }) }

// Asked is how many times a decision was looked up.
func (a *Authority) Asked() int { return locked(&a.mu, func() int { return a.asked }) }

func (a *Authority) Decision(_ context.Context, id uuid.UUID) (gongbu.Issued, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if f := a.onDecision; f != nil {
		defer func() {
			a.mu.Unlock()
			f()
			a.mu.Lock()
		}()
	}
	a.asked++
	if a.down {
		return gongbu.Issued{}, ErrDown
	}
	e, ok := a.decisions[id]
	if !ok {
		return gongbu.Issued{}, gongbu.Errorf(gongbu.CodeNotFound, "Hubu has no decision %s", id)
	}
	return gongbu.Issued{Decision: e.d, State: e.state, IssuedAt: e.issuedAt}, nil
}

func (a *Authority) Settle(_ context.Context, id uuid.UUID, amount int64, failed bool, reason string, providerCost *int64) error {
	return a.report(Report{DecisionID: id, Settled: true, Amount: amount, Failed: failed, Reason: reason, ProviderCost: providerCost})
}

func (a *Authority) Release(_ context.Context, id uuid.UUID, reason string) error {
	return a.report(Report{DecisionID: id, Reason: reason})
}

func (a *Authority) report(r Report) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.down || a.reportDown || a.refuse[r.DecisionID] {
		a.failed++
		return ErrDown
	}
	if _, ok := a.decisions[r.DecisionID]; !ok {
		return fmt.Errorf("status 404: not_found")
	}
	a.reports = append(a.reports, r)
	return nil
}

// Owns answers like Hubu asked with the agent's token: true only for the agent that owns
// the handle; an unknown token is unauthorized.
func (a *Authority) Owns(_ context.Context, caller gongbu.Caller, handle string) (bool, error) {
	agentToken := caller.Token
	if f := locked(&a.mu, func() func() { return a.onOwns }); f != nil {
		f()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.down {
		return false, ErrDown
	}
	known := false
	for _, tok := range a.owners {
		known = known || tok == agentToken
	}
	if !known {
		return false, gongbu.Errorf(gongbu.CodeUnauthorized, "the bearer token is not valid")
	}
	return a.owners[handle] == agentToken, nil
}

// locked returns f's answer, read under mu.
func locked[T any](mu *sync.Mutex, f func() T) T {
	mu.Lock()
	defer mu.Unlock()
	return f()
}

// under runs f under mu.
func under(mu *sync.Mutex, f func()) {
	mu.Lock()
	defer mu.Unlock()
	f()
}
