package console_test

import (
	"net/http"
	"testing"
	"time"

	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu"
)

// Another operator revokes alice's credential through the API: her open console session ends
// on its next request, and her token no longer signs in.
func TestRevocationEndsConsoleSessions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bobToken, err := b.Store.CreateCredential(t.Context(), hubu.RoleOperator, "bob", b.Clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	alice, bob := b.browser(t), b.browser(t)
	alice.mustSignIn(b.OperatorToken)
	bob.mustSignIn(bobToken)

	r, err := b.Client(t, bobToken).RevokeCredentialWithResponse(t.Context(), b.CredentialID(t, b.OperatorToken))
	if err != nil || r.JSON200 == nil {
		t.Fatalf("bob revokes alice: %v %d %s", err, r.StatusCode(), r.Body)
	}
	mustBeSignedOut(t, "alice after the revocation", alice)
	again := b.browser(t)
	mustStatus(t, "alice signs in again", again.signIn(b.OperatorToken), http.StatusUnauthorized)
	mustStatus(t, "bob's session", bob.get("/console/"), http.StatusOK)
}

// Alice rotates her own credential with an overlap: the session she signed in with lasts
// until the overlap ends, and the new token signs in.
func TestRotationEndsConsoleSessionsAfterTheOverlap(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.browser(t)
	br.mustSignIn(b.OperatorToken)
	r, err := b.Client(t, b.OperatorToken).RotateCredentialWithResponse(t.Context(), b.CredentialID(t, b.OperatorToken),
		hubuapi.RotateRequest{OverlapSeconds: ptr(300)})
	if err != nil || r.JSON201 == nil {
		t.Fatalf("rotate: %v %d %s", err, r.StatusCode(), r.Body)
	}
	b.Clock.Advance(5*time.Minute - time.Second)
	mustStatus(t, "the session within the overlap", br.get("/console/"), http.StatusOK)
	b.Clock.Advance(time.Second)
	mustBeSignedOut(t, "the session after the overlap", br)
	b.browser(t).mustSignIn(r.JSON201.Token)
}

func ptr[T any](v T) *T { return &v }
