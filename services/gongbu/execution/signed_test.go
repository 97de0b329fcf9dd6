package execution_test

import (
	"context"
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/proto/decisionsig"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/gongbutest"
)

// A hand-off with Hubu's signature runs without a question to Hubu; Hubu's keys are read
// once, not per decision.
func TestSignedDecisionsRunWithoutAskingHubu(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	for i := range 3 {
		d := env.Issue("agent-a")
		x, created, err := env.Service.ExecuteSigned(context.Background(), d, env.Authority.Sign(d.DecisionID, env.Clock.Now().Add(time.Minute)))
		if err != nil || !created || x.State != gongbu.StateSubmitted {
			t.Fatalf("signed decision %d: created=%v %+v %v", i, created, x, err)
		}
	}
	if env.Authority.Asked() != 0 || env.Authority.KeyReads() != 1 || env.Provider.Submits() != 3 {
		t.Fatalf("asked Hubu %d times, read its keys %d times, %d submits; want 0, 1, 3",
			env.Authority.Asked(), env.Authority.KeyReads(), env.Provider.Submits())
	}
}

// A signature is checked as strictly as Hubu's answer: it must verify, be for this decision,
// and the request must be the work it describes. Nothing is written or sent otherwise.
func TestSignedDecisionRefusals(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	later := env.Clock.Now().Add(time.Minute)
	d := env.Issue("agent-a")
	good := env.Authority.Sign(d.DecisionID, later)
	parts := strings.Split(good, ".")
	swap := "A"
	if parts[2][10] == 'A' {
		swap = "B"
	}
	flipped := parts[2][:10] + swap + parts[2][11:] // the claims, one character changed
	bigger := d
	bigger.AmountMicros++
	other := gongbutest.NewDecision()

	for name, c := range map[string]struct {
		req       gongbu.Decision
		signature string
		want      gongbu.Code
	}{
		"claims changed under the signature": {d, strings.Join([]string{parts[0], parts[1], flipped, parts[3]}, "."), gongbu.CodeForbidden},
		"not a signature":                    {d, "hubu-says-yes", gongbu.CodeForbidden},
		"another decision's signature":       {d, env.Authority.SignAs(other, "dispatching", time.Now(), later), gongbu.CodeForbidden},
		"a request for more than signed":     {bigger, good, gongbu.CodeDecisionMismatch},
		"a decision signed as failed":        {d, env.Authority.SignAs(d, "failed", time.Now(), later), gongbu.CodeForbidden},
	} {
		_, _, err := env.Service.ExecuteSigned(context.Background(), c.req, c.signature)
		if gongbu.ErrorCode(err) != c.want {
			t.Errorf("%s: %v, want %s", name, err, c.want)
		}
	}
	if env.Executions(t) != 0 || env.Provider.Submits() != 0 || env.Authority.Asked() != 0 {
		t.Fatalf("refused hand-offs wrote %d rows, made %d submits, asked Hubu %d times", env.Executions(t), env.Provider.Submits(), env.Authority.Asked())
	}
}

// A signature that says nothing either way (expired, or under a key Hubu does not list) is
// no refusal: Gongbu asks Hubu, as for an unsigned hand-off. Hubu's answer decides.
func TestUncheckableSignaturesAskHubu(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	expired := env.Issue("agent-a")
	if _, _, err := env.Service.ExecuteSigned(context.Background(), expired, env.Authority.Sign(expired.DecisionID, env.Clock.Now())); err != nil {
		t.Fatalf("an expired signature: %v", err)
	}
	if env.Authority.Asked() != 1 {
		t.Fatalf("an expired signature asked Hubu %d times, want 1", env.Authority.Asked())
	}

	_, stranger, _ := ed25519.GenerateKey(nil)
	unknown := env.Issue("agent-a")
	sig, err := decisionsig.Sign(stranger, decisionsig.Claims{DecisionID: unknown.DecisionID, Audience: decisionsig.Audience,
		State: "dispatching", ExpiresAt: env.Clock.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := env.Service.ExecuteSigned(context.Background(), unknown, sig); err != nil {
		t.Fatalf("a signature under an unknown key: %v", err)
	}
	// Hubu was asked, and decided: the stranger's claims (no arguments, no amount) counted for nothing.
	if env.Authority.Asked() != 2 || env.Provider.Submits() != 2 {
		t.Fatalf("asked Hubu %d times, %d submits; want 2 and 2", env.Authority.Asked(), env.Provider.Submits())
	}
	// The unknown key made Gongbu read Hubu's keys again, but not again within the refresh
	// interval: a flood of such signatures is not a flood of reads.
	reads := env.Authority.KeyReads()
	again := env.Issue("agent-a")
	sig2, _ := decisionsig.Sign(stranger, decisionsig.Claims{DecisionID: again.DecisionID, Audience: decisionsig.Audience,
		State: "dispatching", ExpiresAt: env.Clock.Now().Add(time.Minute)})
	if _, _, err := env.Service.ExecuteSigned(context.Background(), again, sig2); err != nil {
		t.Fatal(err)
	}
	if env.Authority.KeyReads() != reads {
		t.Fatalf("a second unknown key within the refresh interval read Hubu's keys again (%d reads, then %d)", reads, env.Authority.KeyReads())
	}

	// Hubu unreachable: an expired signature is a 503, as an unsigned hand-off is.
	env.Authority.SetDown(true)
	down := env.Issue("agent-a")
	if _, _, err := env.Service.ExecuteSigned(context.Background(), down, env.Authority.Sign(down.DecisionID, env.Clock.Now())); gongbu.ErrorCode(err) != gongbu.CodeUnavailable {
		t.Fatalf("an expired signature with Hubu down: %v, want unavailable", err)
	}
}

// The signature carries what Hubu's answer carries for the question "may this decision have
// been submitted already?": a decision signed past dispatching, with no row here, is treated as
// possibly submitted, exactly as when Hubu says so.
func TestSignedStateCountsAsEvidence(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, false)
	d := env.Issue("agent-a")
	x, created, err := env.Service.ExecuteSigned(context.Background(), d, env.Authority.SignAs(d, "executing", time.Now(), env.Clock.Now().Add(time.Minute)))
	if err != nil || !created || x.State != gongbu.StateIndeterminate {
		t.Fatalf("created=%v %+v %v; want a new indeterminate execution", created, x, err)
	}
	if env.Provider.Submits() != 0 || env.Authority.Asked() != 0 {
		t.Fatalf("%d submits, asked Hubu %d times; want 0 and 0", env.Provider.Submits(), env.Authority.Asked())
	}
}

// Gongbu reads Hubu's keys again for a signature under a key it does not hold (a key Hubu made
// since), at most every 10 s; keeps them when a read fails; drops one Hubu no longer lists once
// its keys are 10 minutes old; and a read capability, which anyone can send, makes it read
// them only while it holds none.
func TestDecisionKeysAreReadAgainWhenDue(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	signed := func() error {
		t.Helper()
		d := env.Issue("agent-a")
		_, _, err := env.Service.ExecuteSigned(context.Background(), d, env.Authority.Sign(d.DecisionID, env.Clock.Now().Add(time.Minute)))
		return err
	}
	if err := signed(); err != nil || env.Authority.KeyReads() != 1 {
		t.Fatalf("the first signed decision: %v, %d key reads", err, env.Authority.KeyReads())
	}

	// A capability under a key Gongbu does not hold reads nothing: keys are held.
	env.Authority.NewKey(false)
	env.Clock.Advance(11 * time.Second)
	capability := env.Authority.SignRead(gongbutest.NewDecision().PublicHandle, "agent-a", "", env.Clock.Now().Add(time.Minute))
	if env.Service.MayRead(context.Background(), capability, gongbu.Caller{Token: "agent-a"}, "any") || env.Authority.KeyReads() != 1 {
		t.Fatalf("a capability under an unknown key read Hubu's keys (%d reads)", env.Authority.KeyReads())
	}
	// A hand-off signed with Hubu's new key: read again, checked locally.
	if err := signed(); err != nil || env.Authority.KeyReads() != 2 || env.Authority.Asked() != 0 {
		t.Fatalf("a decision under Hubu's new key: %v, %d key reads, asked %d times; want 2 reads and no question", err, env.Authority.KeyReads(), env.Authority.Asked())
	}

	// Hubu unreachable when the keys are due again: the ones held still check hand-offs.
	env.Authority.SetDown(true)
	env.Clock.Advance(11 * time.Minute)
	if err := signed(); err != nil || env.Authority.KeyReads() != 3 {
		t.Fatalf("with Hubu down and the keys old: %v, %d key reads; want the held key used after one failed read", err, env.Authority.KeyReads())
	}
	env.Authority.SetDown(false)

	// Hubu retires the old keys: once the held ones are due, the retired key drops out, and a
	// signature under it is no longer taken (Gongbu asks Hubu).
	old := env.Issue("agent-a")
	oldSig := env.Authority.Sign(old.DecisionID, env.Clock.Now().Add(2*time.Minute))
	env.Authority.NewKey(true)
	env.Clock.Advance(11 * time.Minute)
	if err := signed(); err != nil {
		t.Fatal(err)
	}
	asked := env.Authority.Asked()
	if _, _, err := env.Service.ExecuteSigned(context.Background(), old, oldSig); err != nil || env.Authority.Asked() != asked+1 {
		t.Fatalf("a signature under a retired key: %v, asked Hubu %d times, want %d", err, env.Authority.Asked(), asked+1)
	}
}

// The evidence that a decision may have been submitted already is the same whether Hubu says
// so or signs it: a decision issued before Gongbu's database epoch began (a restore), signed as
// dispatching, is not submitted blindly to a provider that ignores keys.
func TestSignedDecisionIssuedBeforeTheEpochIsNotSubmittedBlindly(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, false)
	d := env.Issue("agent-a")
	sig := env.Authority.SignAs(d, "dispatching", time.Now().Add(-24*time.Hour), env.Clock.Now().Add(time.Minute))
	x, created, err := env.Service.ExecuteSigned(context.Background(), d, sig)
	if err != nil || !created || x.State != gongbu.StateIndeterminate || env.Provider.Submits() != 0 || env.Authority.Asked() != 0 {
		t.Fatalf("created=%v %+v %v, %d submits, asked %d; want indeterminate without a submit or a question", created, x, err,
			env.Provider.Submits(), env.Authority.Asked())
	}
}

// A Gongbu that sees only long-polls still drops a retired key: old keys are read again for a
// read capability too (an unknown key alone does not make it read them).
func TestReadCapabilitiesReadOldKeysAgain(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	handle := gongbutest.NewDecision().PublicHandle
	caller := gongbu.Caller{Token: "agent-a"}
	first := env.Authority.SignRead(handle, "agent-a", "", env.Clock.Now().Add(time.Minute))
	if !env.Service.MayRead(context.Background(), first, caller, handle) || env.Authority.KeyReads() != 1 {
		t.Fatalf("a capability with no keys held: %d key reads", env.Authority.KeyReads())
	}
	// Signed with the key in use now, and still valid once the keys held are old.
	capability := env.Authority.SignRead(handle, "agent-a", "", env.Clock.Now().Add(12*time.Minute))
	env.Authority.NewKey(true) // Hubu retires the key that signed it
	env.Clock.Advance(11 * time.Minute)
	fresh := env.Authority.SignRead(handle, "agent-a", "", env.Clock.Now().Add(time.Minute))
	if env.Service.MayRead(context.Background(), capability, caller, handle) || env.Authority.KeyReads() != 2 {
		t.Fatalf("a capability under a retired key, the keys held old: taken, or %d key reads (want 2)", env.Authority.KeyReads())
	}
	if !env.Service.MayRead(context.Background(), fresh, caller, handle) || env.Authority.KeyReads() != 2 {
		t.Fatalf("a capability under Hubu's new key: %d key reads", env.Authority.KeyReads())
	}
}
