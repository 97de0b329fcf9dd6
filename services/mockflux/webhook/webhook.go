// Package webhook delivers mockflux's task notices: when a task that named a webhook has
// ended, a POST of {"id":...,"status":...} to its URL carrying the task's secret as BFL sends
// it, through the callback client generated from proto/bfl.openapi.yaml (callback taskReady,
// where the wire format is specified for receivers to verify).
package webhook

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"hubu.dev/hubu/kit/httpjson"
	"hubu.dev/hubu/proto/bflapi"
)

// Outcome is how a notice ended.
type Outcome string

// Outcomes, also the values of the mockflux_webhooks_total metric's label.
const (
	Delivered Outcome = "delivered" // a 2xx answer
	Failed    Outcome = "failed"    // every attempt failed
	Dropped   Outcome = "dropped"   // the webhook_drop fault: never sent
)

// Outcomes lists every Outcome.
var Outcomes = []Outcome{Delivered, Failed, Dropped}

// Header names of a notice: BFL's documented secret header, and the signature its skills
// describe.
const (
	SecretHeader    = "X-Webhook-Secret"
	SignatureHeader = "X-BFL-Signature"
)

// AttemptTimeout bounds one attempt, answer included.
const AttemptTimeout = 5 * time.Second

// DefaultRetryWaits are the waits before the second and third attempts: three attempts in
// all, the first at once.
var DefaultRetryWaits = []time.Duration{100 * time.Millisecond, 500 * time.Millisecond}

// maxAnswer is how much of a receiver's answer is read (and thrown away), so the connection
// can be reused without trusting the receiver to be brief.
const maxAnswer = 64 << 10

// Notice is one webhook to deliver.
type Notice struct {
	JobID string
	// Status is the task's end: Ready, or an end without a result.
	Status string
	URL    string
	Secret []byte
	// Due is when the task finished rendering: the notice is sent then, or at once when that
	// has passed.
	Due time.Time
}

// Options configure a Dispatcher; every field may be left zero.
type Options struct {
	// Now is the clock of due times and of the timestamp header; nil is the wall clock.
	Now func() time.Time
	// After returns a channel that receives once d has passed on Now's clock; nil is
	// time.After. Tests pass timers of their controlled clock.
	After func(d time.Duration) <-chan time.Time
	// RetryWaits are the waits before the second, third, ... attempts; nil is
	// DefaultRetryWaits.
	RetryWaits []time.Duration
	// Client sends the notices; nil is a client of the Dispatcher's own that does not follow
	// redirects (a 3xx counts as a failed attempt).
	Client *http.Client
	// Drop is asked once per notice, when it is due; true drops it (the webhook_drop fault).
	Drop func() bool
	// Done is told how each notice ended. It is not told of one cut short by Close, which is
	// then still due (a restart with a data file sends it).
	Done   func(jobID string, o Outcome)
	Logger *slog.Logger
}

// Dispatcher sends notices, each in a goroutine of its own that waits until it is due, and
// stops them all at Close.
type Dispatcher struct {
	opts      Options
	initiator *bflapi.CallbackInitiator
	ctx       context.Context
	cancel    context.CancelFunc

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// New returns a Dispatcher; Close stops it.
func New(opts Options) *Dispatcher {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.After == nil {
		opts.After = time.After
	}
	if opts.RetryWaits == nil {
		opts.RetryWaits = DefaultRetryWaits
	}
	if opts.Client == nil {
		opts.Client = &http.Client{
			Transport: httpjson.PooledTransport(),
			// A receiver that moved is misconfigured; following it would also turn the POST
			// into a GET on 301-303.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if opts.Drop == nil {
		opts.Drop = func() bool { return false }
	}
	if opts.Done == nil {
		opts.Done = func(string, Outcome) {}
	}
	opts.Logger = cmp.Or(opts.Logger, slog.Default())
	initiator, _ := bflapi.NewCallbackInitiator(bflapi.WithCallbackHTTPClient(opts.Client)) // its options never fail
	d := &Dispatcher{opts: opts, initiator: initiator}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	return d
}

// Send delivers n when it is due. After Close it does nothing.
func (d *Dispatcher) Send(n Notice) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	// The timer is made here rather than in the goroutine, so that it exists when Send
	// returns: a test that moves its clock on right after a submit is answered cannot miss it.
	var due <-chan time.Time
	if wait := n.Due.Sub(d.opts.Now()); wait > 0 {
		due = d.opts.After(wait)
	}
	d.wg.Go(func() { d.deliver(n, due) })
}

// Close stops every notice not yet sent or under way (they stay due; none is told Done) and
// returns once their goroutines have ended.
func (d *Dispatcher) Close() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.cancel()
	d.wg.Wait()
	d.opts.Client.CloseIdleConnections()
}

func (d *Dispatcher) deliver(n Notice, due <-chan time.Time) {
	if due != nil && !d.await(due) {
		return
	}
	log := d.opts.Logger.With("job_id", n.JobID, "webhook", redact(n.URL))
	if d.opts.Drop() {
		log.Info("webhook dropped (fault webhook_drop)")
		d.opts.Done(n.JobID, Dropped)
		return
	}
	body, err := json.Marshal(bflapi.WebhookEvent{Id: n.JobID, Status: bflapi.ResultStatus(cmp.Or(n.Status, string(bflapi.ResultStatusReady)))})
	if err != nil {
		panic(err) // two strings always encode
	}
	var last error
	for attempt := 1; ; attempt++ {
		if last = d.attempt(n, body); last == nil {
			log.Info("webhook delivered", "attempts", attempt)
			d.opts.Done(n.JobID, Delivered)
			return
		}
		if d.ctx.Err() != nil {
			return // stopping: the notice stays due
		}
		if attempt > len(d.opts.RetryWaits) {
			break
		}
		if !d.await(d.opts.After(d.opts.RetryWaits[attempt-1])) {
			return
		}
	}
	log.Warn("webhook failed; giving up", "attempts", len(d.opts.RetryWaits)+1, "err", last)
	d.opts.Done(n.JobID, Failed)
}

// await waits for a timer, false when the Dispatcher stopped first.
func (d *Dispatcher) await(timer <-chan time.Time) bool {
	select {
	case <-timer:
		return true
	case <-d.ctx.Done():
		return false
	}
}

// attempt sends the notice once.
func (d *Dispatcher) attempt(n Notice, body []byte) error {
	ctx, cancel := context.WithTimeout(d.ctx, AttemptTimeout)
	defer cancel()
	params := &bflapi.TaskReadyParams{XWebhookSecret: string(n.Secret), XBFLSignature: Sign(n.Secret, body)}
	resp, err := d.initiator.TaskReadyWithBody(ctx, n.URL, params, "application/json", bytes.NewReader(body))
	if err != nil {
		// A *url.Error quotes the whole URL, query included; keep only what went wrong.
		if uerr, ok := errors.AsType[*url.Error](err); ok {
			err = uerr.Err
		}
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("the receiver answered %d", resp.StatusCode)
	}
	return nil
}

// Sign is the signature header's value for a body: "sha256=" and the lowercase hex
// HMAC-SHA256 of the body, keyed with secret.
func Sign(secret []byte, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// redact is a webhook URL fit for a log line: scheme, host and path, without the user
// information, query or fragment that may carry credentials.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}
