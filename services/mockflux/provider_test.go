package mockflux_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	p := open(t, mockflux.Options{})
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
	p := open(t, mockflux.Options{PendingPolls: 3, Now: func() time.Time { return now }})
	job, _ := submit(t, p, "flux-schnell", "", `{"prompt":"fox","width":512,"height":512}`)
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
	p := open(t, mockflux.Options{DataFile: path})
	body := `{"prompt":"fox","width":1024,"height":768}`
	keyed, _ := submit(t, p, "flux-pro-1.1", "key-1", body)
	if _, _, err := p.Submit(mockflux.SubmitRequest{Model: "flux-dev", IdempotencyKey: "key-2", IgnoreKey: true, Body: []byte(body)}); err != nil {
		t.Fatal(err)
	}
	before, total := p.Charges()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	p = open(t, mockflux.Options{DataFile: path})
	after, totalAfter := p.Charges()
	if len(after) != 2 || totalAfter != total || !sameCharge(after[0], before[0]) || !sameCharge(after[1], before[1]) || *after[1].IdempotencyKey != "key-2" {
		t.Fatalf("charges after restart %+v, before %+v", after, before)
	}
	job, replayed := submit(t, p, "flux-pro-1.1", "key-1", body)
	if !replayed || job != keyed {
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
	p := open(t, mockflux.Options{})
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
