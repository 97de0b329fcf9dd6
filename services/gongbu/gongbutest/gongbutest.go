// Package gongbutest holds the fakes at Gongbu's edges — Hubu as the Authority and a
// scripted paid Provider — and an Env that wires them, with a controllable clock, to a real
// execution.Service on a fresh Postgres database. Only tests import it.
package gongbutest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"hubu.dev/hubu/kit/testclock"
	"hubu.dev/hubu/kit/testlog"
	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/execution"
	"hubu.dev/hubu/services/gongbu/postgres"
	gongbusql "hubu.dev/hubu/sql/gongbu"
	"hubu.dev/hubu/sql/sqltest"
)

// Timings of every Env's services.
const (
	Lease        = time.Minute
	PollInterval = 2 * time.Second
	PollDeadline = 10 * time.Minute
)

// ErrDown is what a fake answers while it is down.
var ErrDown = errors.New("connection refused (fake)")

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
	onDecision func() // called after each decision look-up, outside the lock
	onOwns     func() // called before each ownership check answers, outside the lock
}

type authorityEntry struct {
	d        gongbu.Decision
	state    string
	issuedAt time.Time
}

// NewAuthority returns a fake Hubu that knows no decision.
func NewAuthority() *Authority {
	return &Authority{decisions: map[uuid.UUID]authorityEntry{}, owners: map[string]string{}}
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
func (a *Authority) Owns(_ context.Context, agentToken, handle string) (bool, error) {
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

// SubmitFunc scripts one Submit call.
type SubmitFunc func(ctx context.Context, key string, d gongbu.Decision) (gongbu.Job, error)

// PollFunc scripts one Poll call.
type PollFunc func(ctx context.Context, job gongbu.Job) (gongbu.PollResult, error)

// Provider is a scripted fake paid provider named "bfl". Each Submit and Poll takes the next
// scripted answer; with none left, Submit accepts a job (the same job for the same key, as a
// provider that honours keys would) and Poll answers Pending.
type Provider struct {
	honours bool

	mu      sync.Mutex
	submits []SubmitFunc
	polls   []PollFunc
	keys    map[string]int // submits per key
	jobs    map[string]string
	nSubmit int
	nPoll   int
	polled  []gongbu.Job
}

// NewProvider returns a fake provider that honours idempotency keys or not.
func NewProvider(honours bool) *Provider {
	return &Provider{honours: honours, keys: map[string]int{}, jobs: map[string]string{}}
}

func (p *Provider) Name() string                 { return "bfl" }
func (p *Provider) HonoursIdempotencyKeys() bool { return p.honours }

// OnSubmit scripts the next Submit calls, in order.
func (p *Provider) OnSubmit(fs ...SubmitFunc) {
	under(&p.mu, func() { p.submits = append(p.submits, fs...) })
}

// OnPoll scripts the next Poll calls, in order.
func (p *Provider) OnPoll(fs ...PollFunc) { under(&p.mu, func() { p.polls = append(p.polls, fs...) }) }

// Submits is how many times Submit was called.
func (p *Provider) Submits() int { return locked(&p.mu, func() int { return p.nSubmit }) }

// SubmitsFor is how many times Submit was called with this idempotency key.
func (p *Provider) SubmitsFor(key string) int {
	return locked(&p.mu, func() int { return p.keys[key] })
}

// Polls is how many times Poll was called.
func (p *Provider) Polls() int { return locked(&p.mu, func() int { return p.nPoll }) }

// Polled returns the jobs polled, in order.
func (p *Provider) Polled() []gongbu.Job {
	return locked(&p.mu, func() []gongbu.Job { return append([]gongbu.Job(nil), p.polled...) })
}

func (p *Provider) Submit(ctx context.Context, key string, d gongbu.Decision) (gongbu.Job, error) {
	p.mu.Lock()
	p.nSubmit++
	p.keys[key]++
	var f SubmitFunc
	if len(p.submits) > 0 {
		f, p.submits = p.submits[0], p.submits[1:]
	}
	p.mu.Unlock()
	if f != nil {
		return f(ctx, key, d)
	}
	return p.accept(key), nil
}

// accept is a provider's success: one job per key.
func (p *Provider) accept(key string) gongbu.Job {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, ok := p.jobs[key]
	if !ok {
		id = "job-" + strconv.Itoa(len(p.jobs)+1)
		p.jobs[key] = id
	}
	return gongbu.Job{ID: id, PollingURL: "https://provider.test/v1/get_result?id=" + id}
}

// Accept scripts a successful Submit.
func (p *Provider) Accept() SubmitFunc {
	return func(_ context.Context, key string, _ gongbu.Decision) (gongbu.Job, error) { return p.accept(key), nil }
}

// AcceptCosting scripts a successful Submit whose provider states the job costs micros.
func (p *Provider) AcceptCosting(micros int64) SubmitFunc {
	return func(_ context.Context, key string, _ gongbu.Decision) (gongbu.Job, error) {
		job := p.accept(key)
		job.CostMicros = &micros
		return job, nil
	}
}

// Reject scripts a definite refusal.
func Reject(reason string) SubmitFunc {
	return func(context.Context, string, gongbu.Decision) (gongbu.Job, error) {
		return gongbu.Job{}, &gongbu.Rejected{Reason: reason}
	}
}

// Ambiguous scripts a call whose outcome is unknown (a dropped connection, a 500).
func Ambiguous() SubmitFunc {
	return func(context.Context, string, gongbu.Decision) (gongbu.Job, error) {
		return gongbu.Job{}, errors.New("connection reset by peer (fake)")
	}
}

// Answer scripts a poll answer.
func Answer(status gongbu.PollStatus, imageURL, detail string) PollFunc {
	return func(context.Context, gongbu.Job) (gongbu.PollResult, error) {
		return gongbu.PollResult{Status: status, ImageURL: imageURL, Detail: detail}, nil
	}
}

// PollError scripts a failed poll.
func PollError() PollFunc {
	return func(context.Context, gongbu.Job) (gongbu.PollResult, error) {
		return gongbu.PollResult{}, errors.New("poll timed out (fake)")
	}
}

func (p *Provider) Poll(ctx context.Context, job gongbu.Job) (gongbu.PollResult, error) {
	p.mu.Lock()
	p.nPoll++
	p.polled = append(p.polled, job)
	var f PollFunc
	if len(p.polls) > 0 {
		f, p.polls = p.polls[0], p.polls[1:]
	}
	p.mu.Unlock()
	if f != nil {
		return f(ctx, job)
	}
	return gongbu.PollResult{Status: gongbu.JobPending}, nil
}

// AtOnce runs f(0) … f(n-1), each on a goroutine of its own, releases them together and
// waits for them all.
func AtOnce(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}

// NewDecision returns a valid decision for a 1024x1024 flux-dev image.
func NewDecision() gongbu.Decision {
	seed := int64(42)
	return gongbu.Decision{
		DecisionID:   uuid.New(),
		PublicHandle: contract.NewPublicHandle(),
		AgentID:      uuid.New(),
		Tool:         "generate_image",
		Scope:        gongbu.Scope{Provider: "bfl", Model: "flux-dev", Size: "1024x1024"},
		Arguments:    gongbu.ImageArguments{Prompt: "an origami fox", Model: "flux-dev", Width: 1024, Height: 1024, Seed: &seed},
		AmountMicros: 25_000,
		Currency:     "USD",
	}
}

// Env is an execution.Service on its own database with fakes at its edges.
type Env struct {
	Pool      *pgxpool.Pool
	DBURL     string
	Store     *postgres.Store
	Clock     *testclock.Clock
	Authority *Authority
	Provider  *Provider
	Service   *execution.Service
	Logs      *testlog.Buffer
}

// New returns an Env whose provider honours idempotency keys or not.
func New(t testing.TB, honours bool) *Env {
	t.Helper()
	pool, dbURL := sqltest.NewPool(t, "gongbu", gongbusql.Migrations())
	return newEnv(pool, dbURL, honours)
}

// NewCounted is New on a pool of one connection whose traffic trips counts, for tests that
// pin the round trips of a path (see sqltest.RoundTrips).
func NewCounted(t testing.TB, honours bool, trips *sqltest.RoundTrips) *Env {
	t.Helper()
	dbURL := sqltest.NewDatabase(t, "gongbu", gongbusql.Migrations())
	return newEnv(sqltest.NewCountedPool(t, dbURL, trips), dbURL, honours)
}

func newEnv(pool *pgxpool.Pool, dbURL string, honours bool) *Env {
	e := &Env{
		Pool: pool, DBURL: dbURL, Store: postgres.NewStore(pool), Clock: testclock.New(),
		Authority: NewAuthority(), Provider: NewProvider(honours), Logs: &testlog.Buffer{},
	}
	e.Service = e.NewService(e.Provider)
	return e
}

// NewService returns another service on the same database, clock and Authority, as a
// second worker process or a restarted one would be.
func (e *Env) NewService(p gongbu.Provider) *execution.Service {
	return &execution.Service{
		Store: e.Store, Providers: map[string]gongbu.Provider{p.Name(): p}, Authority: e.Authority,
		Logger: slog.New(slog.NewJSONHandler(e.Logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:    e.Clock.Now, Lease: Lease, PollInterval: PollInterval, PollDeadline: PollDeadline,
		// The tests drive every poll through Tick and the controllable clock.
		FirstPoll: -1,
	}
}

// Issue makes the Authority know a new decision in state dispatching and returns it.
func (e *Env) Issue(agentToken string) gongbu.Decision { return e.IssueIn("dispatching", agentToken) }

// IssueIn makes the Authority know a new decision in an operation state and returns it.
func (e *Env) IssueIn(state, agentToken string) gongbu.Decision {
	d := NewDecision()
	e.Authority.Issue(d, state, agentToken)
	return d
}

// IssueWith makes the Authority know a new decision in state dispatching, changed by change,
// and returns it.
func (e *Env) IssueWith(agentToken string, change func(*gongbu.Decision)) gongbu.Decision {
	d := NewDecision()
	change(&d)
	e.Authority.Issue(d, "dispatching", agentToken)
	return d
}

// Executions counts the rows in the executions table.
func (e *Env) Executions(t testing.TB) int {
	t.Helper()
	var n int
	if err := e.Pool.QueryRow(context.Background(), "SELECT count(*) FROM executions").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Epoch returns the database's epoch.
func (e *Env) Epoch(t testing.TB) gongbu.Epoch {
	t.Helper()
	ep, err := e.Store.Epoch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// Get returns the execution of a decision, failing the test when there is none.
func (e *Env) Get(t testing.TB, id uuid.UUID) gongbu.Execution {
	t.Helper()
	x, err := e.Store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// Tick runs one background pass, failing the test on error.
func (e *Env) Tick(t testing.TB) {
	t.Helper()
	if err := e.Service.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// FetchFunc scripts one FetchResult call.
type FetchFunc func(ctx context.Context, url string) (gongbu.Image, error)

// ImageProvider is a Provider whose results expire, so Gongbu downloads them: each
// FetchResult takes the next scripted answer, and with none left delivers TinyPNG.
type ImageProvider struct {
	*Provider

	mu      sync.Mutex
	fetches []FetchFunc
	fetched []string
}

var _ gongbu.ResultFetcher = (*ImageProvider)(nil)

// NewImageProvider returns a fake provider whose results Gongbu downloads.
func NewImageProvider(honours bool) *ImageProvider {
	return &ImageProvider{Provider: NewProvider(honours)}
}

// OnFetch scripts the next FetchResult calls, in order.
func (p *ImageProvider) OnFetch(fs ...FetchFunc) {
	under(&p.mu, func() { p.fetches = append(p.fetches, fs...) })
}

// Fetched returns the URLs downloaded, in order.
func (p *ImageProvider) Fetched() []string {
	return locked(&p.mu, func() []string { return append([]string(nil), p.fetched...) })
}

func (p *ImageProvider) FetchResult(ctx context.Context, url string) (gongbu.Image, error) {
	p.mu.Lock()
	p.fetched = append(p.fetched, url)
	var f FetchFunc
	if len(p.fetches) > 0 {
		f, p.fetches = p.fetches[0], p.fetches[1:]
	}
	p.mu.Unlock()
	if f != nil {
		return f(ctx, url)
	}
	return gongbu.NewImage("image/png", TinyPNG)
}

// FetchError is a download that fails.
func FetchError() FetchFunc {
	return func(context.Context, string) (gongbu.Image, error) {
		return gongbu.Image{}, errors.New("sample download failed (test)")
	}
}

// TinyPNG is a valid 1×1 PNG.
var TinyPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89" +
	"\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")

// NoisyPNG is a width×height PNG of pseudo-random pixels from seed: as large as an image of
// that size gets (noise does not compress), the stand-in for a provider's multi-megapixel
// result.
func NoisyPNG(width, height int, seed uint64) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, width, height))
	x := seed | 1
	for i := range img.Pix {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		img.Pix[i] = byte(x)
		if i%4 == 3 {
			img.Pix[i] = 255 // opaque
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// Deliver is a download that delivers b as mimeType.
func Deliver(mimeType string, b []byte) FetchFunc {
	return func(context.Context, string) (gongbu.Image, error) { return gongbu.NewImage(mimeType, b) }
}
