package mockflux_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/kit/testclock"
	"hubu.dev/hubu/services/mockflux"
)

func open(t *testing.T, opts mockflux.Options) *mockflux.Provider {
	t.Helper()
	p, err := mockflux.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func submit(t *testing.T, p *mockflux.Provider, model, key, body string) (mockflux.Job, bool) {
	t.Helper()
	job, replayed, err := p.Submit(mockflux.SubmitRequest{Model: model, IdempotencyKey: key, Body: []byte(body)})
	if err != nil {
		t.Fatalf("submit %s: %v", body, err)
	}
	return job, replayed
}

// Two bodies that are the same JSON value are the same request, however they are spelled.
func TestSameRequestHoweverSpelled(t *testing.T) {
	t.Parallel()
	p := open(t, mockflux.Options{HonoursIdempotency: true})
	first, _ := submit(t, p, "flux-dev", "k", `{"prompt":"fox","width":1024,"height":768,"seed":7,"extra":{"b":1,"a":[1.5,2]}}`)
	for _, body := range []string{
		`{"height":768,"width":1024,"prompt":"fox","seed":7,"extra":{"a":[1.5,2],"b":1}}`,
		` { "prompt" : "fox", "width": 1024.0, "height": 7.68e2, "seed": 7, "extra": {"a": [15e-1, 2], "b": 1.0} } `,
	} {
		job, replayed := submit(t, p, "flux-dev", "k", body)
		if !replayed || job.ID != first.ID {
			t.Fatalf("%s: replayed=%v job %s, want %s", body, replayed, job.ID, first.ID)
		}
	}
	for _, c := range []struct{ model, body string }{
		{"flux-dev", `{"prompt":"fox","width":1024,"height":768,"seed":8,"extra":{"b":1,"a":[1.5,2]}}`},
		{"flux-dev", `{"prompt":"fox","width":1024,"height":768,"seed":7,"extra":{"b":1,"a":[2,1.5]}}`},
		{"flux-pro-1.1", `{"prompt":"fox","width":1024,"height":768,"seed":7,"extra":{"b":1,"a":[1.5,2]}}`},
	} {
		_, _, err := p.Submit(mockflux.SubmitRequest{Model: c.model, IdempotencyKey: "k", Body: []byte(c.body)})
		if mockflux.ErrorCode(err) != mockflux.CodeKeyReused {
			t.Fatalf("%s %s: err = %v, want key_reused", c.model, c.body, err)
		}
	}
	if charges, total := p.Charges(); len(charges) != 1 || total != 25_000 {
		t.Fatalf("charges %d total %d", len(charges), total)
	}
}

func TestPendingThenReady(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	p := open(t, mockflux.Options{HonoursIdempotency: true, PendingPolls: 3, Now: func() time.Time { return now }})
	job, _ := submit(t, p, "flux-dev", "", `{"prompt":"fox","width":512,"height":512}`)
	for i, want := range []float64{0, 1.0 / 3, 2.0 / 3} {
		poll, ok := p.Poll(job.ID)
		if !ok || poll.Ready || poll.Progress != want {
			t.Fatalf("poll %d: %+v %v", i+1, poll, ok)
		}
	}
	readyAt := now
	now = now.Add(time.Minute)
	for range 2 {
		poll, _ := p.Poll(job.ID)
		if !poll.Ready || !poll.ReadyAt.Equal(readyAt.Add(time.Minute)) {
			t.Fatalf("ready poll: %+v", poll)
		}
		now = now.Add(time.Minute) // the first Ready time stays
	}
	if _, ok := p.Poll("nope"); ok {
		t.Fatal("an unknown job was found")
	}
	if job.Seed == 0 {
		t.Fatal("a job without a seed got none")
	}
}

// Jobs, charges and idempotency keys survive a restart through the data file; keys ignored
// under idempotency_off stay ignored.
func TestReplayFromDataFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "mockflux.jsonl")
	p := open(t, mockflux.Options{HonoursIdempotency: true, DataFile: path})
	body := `{"prompt":"fox","width":1024,"height":768}`
	keyed, _ := submit(t, p, "flux-pro-1.1", "key-1", body)
	if _, _, err := p.Submit(mockflux.SubmitRequest{Model: "flux-dev", IdempotencyKey: "key-2", IgnoreKey: true, Body: []byte(body)}); err != nil {
		t.Fatal(err)
	}
	before, total := p.Charges()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	p = open(t, mockflux.Options{HonoursIdempotency: true, DataFile: path})
	after, totalAfter := p.Charges()
	if len(after) != 2 || totalAfter != total || !sameCharge(after[0], before[0]) || !sameCharge(after[1], before[1]) || *after[1].IdempotencyKey != "key-2" {
		t.Fatalf("charges after restart %+v, before %+v", after, before)
	}
	job, replayed := submit(t, p, "flux-pro-1.1", "key-1", body)
	if !replayed || !reflect.DeepEqual(job, keyed) {
		t.Fatalf("after restart: replayed=%v %+v, want %+v", replayed, job, keyed)
	}
	if _, replayed := submit(t, p, "flux-dev", "key-2", body); replayed {
		t.Fatal("a key that was ignored when it was sent became a replay")
	}
	if charges, _ := p.Charges(); len(charges) != 3 {
		t.Fatalf("%d charges", len(charges))
	}
}

func TestRejectsWithoutCharging(t *testing.T) {
	t.Parallel()
	p := open(t, mockflux.Options{HonoursIdempotency: true})
	long := strings.Repeat("k", mockflux.MaxIdempotencyKey+1)
	for _, c := range []struct {
		model, key, body string
		code             mockflux.Code
	}{
		{"flux-unknown", "", `{"prompt":"fox","width":1024,"height":768}`, mockflux.CodeNotFound},
		{"flux-dev", long, `{"prompt":"fox","width":1024,"height":768}`, mockflux.CodeInvalid},
		{"flux-dev", "", `[1]`, mockflux.CodeInvalid},
		{"flux-dev", "", `{"prompt":"fox","width":1024,"height":768} {}`, mockflux.CodeInvalid},
	} {
		_, _, err := p.Submit(mockflux.SubmitRequest{Model: c.model, IdempotencyKey: c.key, Body: []byte(c.body)})
		if got := mockflux.ErrorCode(err); got != c.code {
			t.Errorf("%s %q: code %q (%v), want %q", c.model, c.body, got, err, c.code)
		}
	}
	if charges, _ := p.Charges(); len(charges) != 0 {
		t.Fatalf("%d charges", len(charges))
	}
}

func sameCharge(a, b mockflux.Charge) bool {
	key := func(c mockflux.Charge) string {
		if c.IdempotencyKey == nil {
			return "<nil>"
		}
		return *c.IdempotencyKey
	}
	return a.ID == b.ID && a.JobID == b.JobID && a.Model == b.Model && a.AmountMicros == b.AmountMicros &&
		key(a) == key(b) && a.CreatedAt.Equal(b.CreatedAt)
}

// A job is Ready once its render time has passed and its pending polls are used up, and
// ready_at says when: its render deadline when polls were used up before it, else the first
// poll that answered Ready.
func TestRenderTimeHoldsReady(t *testing.T) {
	t.Parallel()
	const render = 10 * time.Second
	body := `{"prompt":"fox","width":512,"height":512}`
	readyAt := func(p *mockflux.Provider) time.Time {
		charges, _ := p.Charges()
		return charges[len(charges)-1].ReadyAt
	}

	t.Run("no pending polls", func(t *testing.T) {
		t.Parallel()
		clk := testclock.New()
		p := open(t, mockflux.Options{HonoursIdempotency: true, RenderTime: render, Now: clk.Now})
		job, _ := submit(t, p, "flux-dev", "", body)
		if !job.RenderedAt.Equal(job.CreatedAt.Add(render)) {
			t.Fatalf("rendered at %v, created %v", job.RenderedAt, job.CreatedAt)
		}
		clk.Advance(render / 4)
		if poll, _ := p.Poll(job.ID); poll.Ready || poll.Progress != 0.25 {
			t.Fatalf("a quarter of the way: %+v", poll)
		}
		clk.Advance(render/4*3 - time.Nanosecond)
		if poll, _ := p.Poll(job.ID); poll.Ready || !readyAt(p).IsZero() {
			t.Fatalf("a nanosecond early: %+v, ready_at %v", poll, readyAt(p))
		}
		clk.Advance(time.Hour + time.Nanosecond)
		// Known without a poll, and not moved by a late one.
		if got := readyAt(p); !got.Equal(job.RenderedAt) {
			t.Fatalf("ready_at %v, want %v", got, job.RenderedAt)
		}
		poll, _ := p.Poll(job.ID)
		if !poll.Ready || !poll.ReadyAt.Equal(job.RenderedAt) || !poll.FirstReady.Equal(clk.Now()) {
			t.Fatalf("ready poll %+v", poll)
		}
	})

	t.Run("polls used up while rendering", func(t *testing.T) {
		t.Parallel()
		clk := testclock.New()
		p := open(t, mockflux.Options{HonoursIdempotency: true, PendingPolls: 2, RenderTime: render, Now: clk.Now})
		job, _ := submit(t, p, "flux-dev", "", body)
		for range 3 {
			if poll, _ := p.Poll(job.ID); poll.Ready {
				t.Fatalf("Ready while rendering: %+v", poll)
			}
		}
		clk.Advance(render)
		if got := readyAt(p); !got.Equal(job.RenderedAt) {
			t.Fatalf("ready_at %v, want %v", got, job.RenderedAt)
		}
		clk.Advance(time.Second)
		if poll, _ := p.Poll(job.ID); !poll.Ready || !poll.ReadyAt.Equal(job.RenderedAt) {
			t.Fatalf("poll after rendering: %+v", poll)
		}
	})

	t.Run("polls left after rendering", func(t *testing.T) {
		t.Parallel()
		clk := testclock.New()
		p := open(t, mockflux.Options{HonoursIdempotency: true, PendingPolls: 2, RenderTime: render, Now: clk.Now})
		job, _ := submit(t, p, "flux-dev", "", body)
		clk.Advance(2 * render)
		for i, want := range []float64{0, 0.5} {
			if poll, _ := p.Poll(job.ID); poll.Ready || poll.Progress != want {
				t.Fatalf("pending poll %d: %+v", i+1, poll)
			}
		}
		if got := readyAt(p); !got.IsZero() {
			t.Fatalf("ready_at %v before any Ready answer", got)
		}
		clk.Advance(time.Second)
		first := clk.Now()
		if poll, _ := p.Poll(job.ID); !poll.Ready || !poll.ReadyAt.Equal(first) {
			t.Fatalf("Ready poll: %+v", poll)
		}
		clk.Advance(time.Second)
		p.Poll(job.ID)
		if got := readyAt(p); !got.Equal(first) {
			t.Fatalf("ready_at %v, want the first Ready answer %v", got, first)
		}
	})
}

const hookedBody = `{"prompt":"fox","width":512,"height":512,"webhook_url":"https://hooks.example/flux?token=t0k3n","webhook_secret":"0123456789abcdef-first"}`

// The webhook fields say where to report a job, not what to make: a submit under the same key
// with another webhook, or none, is the same request and finds the first job, whose webhook
// stands.
func TestWebhookIsNotPartOfTheRequest(t *testing.T) {
	t.Parallel()
	p := open(t, mockflux.Options{HonoursIdempotency: true})
	first, _ := submit(t, p, "flux-dev", "k", hookedBody)
	if first.Webhook.URL != "https://hooks.example/flux?token=t0k3n" || first.Webhook.Secret != "0123456789abcdef-first" {
		t.Fatalf("webhook %#v", first.Webhook)
	}
	for _, body := range []string{
		strings.Replace(strings.Replace(hookedBody, "hooks.example", "other.example", 1), "-first", "-second", 1),
		`{"prompt":"fox","width":512,"height":512}`,
		`{"prompt":"fox","width":512,"height":512,"webhook_url":null,"webhook_secret":null}`,
	} {
		job, replayed := submit(t, p, "flux-dev", "k", body)
		if !replayed || !reflect.DeepEqual(job, first) {
			t.Fatalf("%s: replayed=%v %+v, want %+v", body, replayed, job, first)
		}
	}
	if charges, total := p.Charges(); len(charges) != 1 || total != 25_000 {
		t.Fatalf("charges %d total %d", len(charges), total)
	}
	// Nothing else about the body is exempt.
	_, _, err := p.Submit(mockflux.SubmitRequest{Model: "flux-dev", IdempotencyKey: "k", Body: []byte(strings.Replace(hookedBody, "fox", "cat", 1))})
	if mockflux.ErrorCode(err) != mockflux.CodeKeyReused {
		t.Fatalf("another prompt: %v", err)
	}
	// The secret prints as [redacted], also inside the job.
	for _, s := range []string{fmt.Sprint(first), fmt.Sprintf("%+v", first), fmt.Sprintf("%#v", first)} {
		if strings.Contains(s, "0123456789abcdef") || !strings.Contains(s, "[redacted]") {
			t.Fatalf("printed: %s", s)
		}
	}
}

func TestBadWebhookFields(t *testing.T) {
	t.Parallel()
	p := open(t, mockflux.Options{HonoursIdempotency: true})
	const secret = `"0123456789abcdef"`
	for _, c := range []struct{ fields, want string }{
		{`"webhook_url":"https://h.example/x"`, "send both or neither"},
		{`"webhook_secret":` + secret, "send both or neither"},
		{`"webhook_url":"https://h.example/x","webhook_secret":null`, "send both or neither"},
		{`"webhook_url":"ftp://h.example/x","webhook_secret":` + secret, "absolute http or https URL"},
		{`"webhook_url":"/relative","webhook_secret":` + secret, "absolute http or https URL"},
		{`"webhook_url":"https://","webhook_secret":` + secret, "absolute http or https URL"},
		{`"webhook_url":"","webhook_secret":` + secret, "absolute http or https URL"},
		{`"webhook_url":"http:opaque","webhook_secret":` + secret, "absolute http or https URL"},
		{`"webhook_url":"https://h.example/` + strings.Repeat("p", mockflux.MaxWebhookURL) + `","webhook_secret":` + secret, "at most 2083 bytes"},
		{`"webhook_url":7,"webhook_secret":` + secret, "webhook_url: must be a string"},
		{`"webhook_url":"https://h.example/x","webhook_secret":"short-secret"`, "webhook_secret: must be 16 to 256 bytes, not 12"},
		{`"webhook_url":"https://h.example/x","webhook_secret":"` + strings.Repeat("s", mockflux.MaxWebhookSecret+1) + `"`, "not 257"},
		{`"webhook_url":"https://h.example/x","webhook_secret":{"k":1}`, "webhook_secret: must be a string"},
	} {
		body := `{"prompt":"fox","width":512,"height":512,` + c.fields + `}`
		_, _, err := p.Submit(mockflux.SubmitRequest{Model: "flux-dev", IdempotencyKey: "k", Body: []byte(body)})
		if mockflux.ErrorCode(err) != mockflux.CodeInvalid || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want invalid saying %q", c.fields, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "0123456789abcdef") {
			t.Errorf("%s: the secret is in the error %q", c.fields, err)
		}
	}
	// The limits themselves are accepted.
	submit(t, p, "flux-dev", "", `{"prompt":"fox","width":512,"height":512,"webhook_url":"http://h.example/`+
		strings.Repeat("p", mockflux.MaxWebhookURL-len("http://h.example/"))+`","webhook_secret":"`+strings.Repeat("s", mockflux.MinWebhookSecret)+`"}`)
	submit(t, p, "flux-dev", "", `{"prompt":"fox","width":512,"height":512,"webhook_url":"HTTPS://h.example","webhook_secret":"`+strings.Repeat("s", mockflux.MaxWebhookSecret)+`"}`)
	if charges, _ := p.Charges(); len(charges) != 2 {
		t.Fatalf("%d charges", len(charges))
	}
}

// With a data file, webhooks without an outcome are still due after a restart, with their
// secret and their render deadline; those with one are not. A second outcome is ignored.
func TestPendingWebhooksSurviveARestart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "mockflux.jsonl")
	clk := testclock.New()
	p := open(t, mockflux.Options{HonoursIdempotency: true, DataFile: path, RenderTime: time.Minute, Now: clk.Now})
	var hooked []mockflux.Job
	for i := range 3 {
		job, _ := submit(t, p, "flux-dev", "", strings.Replace(hookedBody, "fox", fmt.Sprint("fox ", i), 1))
		hooked = append(hooked, job)
		submit(t, p, "flux-dev", "", `{"prompt":"no webhook","width":512,"height":512}`)
	}
	if got := p.PendingWebhooks(); !reflect.DeepEqual(got, hooked) {
		t.Fatalf("pending %+v, want %+v", got, hooked)
	}
	must(t, p.RecordWebhook(hooked[1].ID, "delivered"))
	must(t, p.RecordWebhook(hooked[1].ID, "failed")) // the first outcome stands
	if err := p.RecordWebhook(hooked[0].ID, ""); err == nil {
		t.Fatal("an empty outcome was recorded")
	}
	if err := p.RecordWebhook("no-such-job", "delivered"); err == nil {
		t.Fatal("an outcome for an unknown job was recorded")
	}
	must(t, p.Close())

	p = open(t, mockflux.Options{HonoursIdempotency: true, DataFile: path, RenderTime: time.Hour, Now: clk.Now})
	got := p.PendingWebhooks()
	if !reflect.DeepEqual(got, []mockflux.Job{hooked[0], hooked[2]}) {
		t.Fatalf("pending after restart %+v", got)
	}
	if got[0].Webhook.Secret != "0123456789abcdef-first" || !got[0].RenderedAt.Equal(got[0].CreatedAt.Add(time.Minute)) {
		t.Fatalf("after restart %#v rendered at %v", got[0].Webhook, got[0].RenderedAt)
	}
	must(t, p.RecordWebhook(hooked[0].ID, "dropped"))
	must(t, p.Close())
	p = open(t, mockflux.Options{HonoursIdempotency: true, DataFile: path, Now: clk.Now})
	if got := p.PendingWebhooks(); !reflect.DeepEqual(got, []mockflux.Job{hooked[2]}) {
		t.Fatalf("pending after the second restart %+v", got)
	}
}

// A journal written before render times and webhooks existed replays: its jobs rendered when
// they were accepted.
func TestReplayOfAnOlderJournal(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "mockflux.jsonl")
	line := `{"type":"submit","job":{"id":"5f0c6f4e-2b1a-4c1e-9d7a-0d4b8f1e2a3c","model":"flux-dev","prompt":"fox","seed":7,"width":512,"height":512,"output_format":"png","request_hash":"x","created_at":"2026-11-30T09:00:00Z"},"charge":{"id":"c1","job_id":"5f0c6f4e-2b1a-4c1e-9d7a-0d4b8f1e2a3c","model":"flux-dev","amount_micros":25000,"idempotency_key":null,"created_at":"2026-11-30T09:00:00Z"}}` + "\n"
	must(t, os.WriteFile(path, []byte(line), 0o600))
	clk := testclock.New()
	p := open(t, mockflux.Options{HonoursIdempotency: true, DataFile: path, RenderTime: time.Hour, Now: clk.Now})
	charges, _ := p.Charges()
	if len(charges) != 1 || !charges[0].ReadyAt.Equal(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)) {
		t.Fatalf("charges %+v", charges)
	}
	if len(p.PendingWebhooks()) != 0 {
		t.Fatal("a job without a webhook is due one")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
