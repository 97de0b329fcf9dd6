package httpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu"
)

// credentials lists every credential through the API.
func (b *bundle) credentials(t testing.TB) []hubuapi.Credential {
	t.Helper()
	r, err := b.Operator.ListCredentialsWithResponse(context.Background())
	if err != nil || r.JSON200 == nil {
		t.Fatalf("list credentials: %v %s", err, r.Body)
	}
	if strings.Contains(string(r.Body), "token") || strings.Contains(string(r.Body), "hash") {
		t.Fatalf("the list shows tokens or hashes: %s", r.Body)
	}
	return r.JSON200.Credentials
}

// credentialOf returns the one credential of that kind and name that is not expired or revoked.
func (b *bundle) credentialOf(t testing.TB, kind hubuapi.CredentialKind, name string) hubuapi.Credential {
	t.Helper()
	var found []hubuapi.Credential
	for _, c := range b.credentials(t) {
		if c.Kind == kind && c.Name == name && (c.State == hubuapi.CredentialStateActive || c.State == hubuapi.CredentialStateExpiring) {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d valid %s credentials named %s, want 1", len(found), kind, name)
	}
	return found[0]
}

func revoke(t testing.TB, by *hubuapi.ClientWithResponses, id uuid.UUID) *hubuapi.RevokeCredentialResponse {
	t.Helper()
	r, err := by.RevokeCredentialWithResponse(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func rotate(t testing.TB, by *hubuapi.ClientWithResponses, id uuid.UUID, overlap int) *hubuapi.RotateCredentialResponse {
	t.Helper()
	body := hubuapi.RotateRequest{}
	if overlap > 0 {
		body.OverlapSeconds = &overlap
	}
	r, err := by.RotateCredentialWithResponse(context.Background(), id, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// refusal checks a 401 problem answer with its code.
func refusal(t testing.TB, what string, status int, body []byte, code string) {
	t.Helper()
	if status != http.StatusUnauthorized || problemCode(t, body) != code {
		t.Fatalf("%s: %d %s, want 401 %s", what, status, body, code)
	}
}

func TestRevokeAgentCredential(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	painter, other := b.NewAgent(t, "painter", nil), b.NewAgent(t, "other", nil)
	mustOperation(t, authorize(t, painter, newCall("flux-dev")))
	alice := b.credentialOf(t, hubuapi.CredentialKindOperator, "alice")
	cred := b.credentialOf(t, hubuapi.CredentialKindAgent, "painter")
	if cred.AgentId == nil || *cred.AgentId != painter.ID || cred.RevokedAt != nil || cred.ExpiresAt != nil {
		t.Fatalf("the agent's credential: %+v", cred)
	}

	b.Clock.Advance(time.Minute)
	r := revoke(t, b.Operator, cred.Id)
	if r.JSON200 == nil {
		t.Fatalf("revoke: %d %s", r.StatusCode(), r.Body)
	}
	got := r.JSON200
	if got.State != hubuapi.CredentialStateRevoked || got.RevokedAt == nil || !got.RevokedAt.Equal(b.Clock.Now()) ||
		got.RevokedBy == nil || got.RevokedBy.Id != alice.Id || got.RevokedBy.Name != "alice" {
		t.Fatalf("revoked: %+v", got)
	}

	// The very next request is refused, with a code that says why; nothing is recorded.
	before := b.Count(t, "SELECT count(*) FROM operations")
	a := authorize(t, painter, newCall("flux-dev"))
	refusal(t, "authorize after the revocation", a.StatusCode(), a.Body, "credential_revoked")
	if !strings.Contains(problemDetail(t, a.Body), "revoked") {
		t.Fatalf("the refusal does not say why: %s", a.Body)
	}
	c, _ := painter.Client.GetCapabilitiesWithResponse(ctx)
	refusal(t, "capabilities after the revocation", c.StatusCode(), c.Body, "credential_revoked")
	if n := b.Count(t, "SELECT count(*) FROM operations"); n != before {
		t.Fatalf("a revoked agent's request recorded an operation: %d, was %d", n, before)
	}
	// Other agents go on; a token Hubu never issued is still just unauthorized.
	mustOperation(t, authorize(t, other, newCall("flux-dev")))
	forged := b.Client(t, "hubu_agent_"+strings.Repeat("a", 32))
	f, _ := forged.GetCapabilitiesWithResponse(ctx)
	refusal(t, "an unknown token", f.StatusCode(), f.Body, "unauthorized")

	// Revoking again answers the same record: the first revocation stays.
	b.Clock.Advance(time.Minute)
	again := revoke(t, b.Operator, cred.Id)
	if again.JSON200 == nil || !again.JSON200.RevokedAt.Equal(*got.RevokedAt) {
		t.Fatalf("revoke again: %d %s", again.StatusCode(), again.Body)
	}
	if r := revoke(t, b.Operator, uuid.New()); r.StatusCode() != http.StatusNotFound || problemCode(t, r.Body) != "not_found" {
		t.Fatalf("revoke an unknown credential: %d %s", r.StatusCode(), r.Body)
	}
	if n := b.Count(t, "SELECT count(*) FROM credentials WHERE revoked_by IS NOT NULL"); n != 1 {
		t.Fatalf("%d revocations recorded, want 1", n)
	}
	logged := b.Logs.String()
	if !strings.Contains(logged, `"msg":"credential revoked"`) || !strings.Contains(logged, cred.Id.String()) {
		t.Fatalf("the revocation is not logged: %s", logged)
	}
}

func TestRotateAgentCredentialWithOverlap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	painter := b.NewAgent(t, "painter", nil)
	old := b.credentialOf(t, hubuapi.CredentialKindAgent, "painter")
	c := newCall("flux-dev")
	first := mustOperation(t, authorize(t, painter, c))

	r := rotate(t, b.Operator, old.Id, 600)
	if r.JSON201 == nil {
		t.Fatalf("rotate: %d %s", r.StatusCode(), r.Body)
	}
	rot := r.JSON201
	if !strings.HasPrefix(rot.Token, "hubu_agent_") || rot.Token == painter.Token {
		t.Fatal("the rotation's token is no new agent token")
	}
	if rot.Credential.State != hubuapi.CredentialStateActive || rot.Credential.Replaces == nil || *rot.Credential.Replaces != old.Id ||
		rot.Credential.AgentId == nil || *rot.Credential.AgentId != painter.ID || rot.Credential.Name != "painter" ||
		rot.Credential.CreatedBy == nil || rot.Credential.CreatedBy.Name != "alice" {
		t.Fatalf("the replacement: %+v", rot.Credential)
	}
	if rot.Replaced.State != hubuapi.CredentialStateExpiring || rot.Replaced.ExpiresAt == nil ||
		!rot.Replaced.ExpiresAt.Equal(b.Clock.Now().Add(10*time.Minute)) || rot.Replaced.ReplacedBy == nil || *rot.Replaced.ReplacedBy != rot.Credential.Id {
		t.Fatalf("the replaced credential: %+v", rot.Replaced)
	}

	// During the overlap both tokens act as the same agent: a redelivery through the new
	// token is a replay of the operation the old one started.
	renewed := agent{ID: painter.ID, Token: rot.Token, Client: b.Client(t, rot.Token)}
	if op := mustOperation(t, authorize(t, renewed, c)); op.PublicHandle != first.PublicHandle {
		t.Fatalf("the same call through the new token is another operation: %+v", op)
	}
	b.Clock.Advance(10*time.Minute - time.Second)
	if caps, _ := painter.Client.GetCapabilitiesWithResponse(ctx); caps.JSON200 == nil || caps.JSON200.AgentId != painter.ID {
		t.Fatalf("the old token within its overlap: %d %s", caps.StatusCode(), caps.Body)
	}
	b.Clock.Advance(time.Second)
	caps, _ := painter.Client.GetCapabilitiesWithResponse(ctx)
	refusal(t, "the old token after its overlap", caps.StatusCode(), caps.Body, "credential_expired")
	if caps, _ := renewed.Client.GetCapabilitiesWithResponse(ctx); caps.JSON200 == nil || caps.JSON200.AgentId != painter.ID {
		t.Fatalf("the new token: %d %s", caps.StatusCode(), caps.Body)
	}
	if got := b.credentialOf(t, hubuapi.CredentialKindAgent, "painter"); got.Id != rot.Credential.Id {
		t.Fatalf("the valid credential is %s, want the replacement", got.Id)
	}

	// A credential is replaced once: rotating the old one again is a conflict.
	if again := rotate(t, b.Operator, old.Id, 0); again.StatusCode() != http.StatusConflict || problemCode(t, again.Body) != "conflict" {
		t.Fatalf("rotate a replaced credential: %d %s", again.StatusCode(), again.Body)
	}
	if n := b.Count(t, "SELECT count(*) FROM credentials WHERE kind = 'agent'"); n != 2 {
		t.Fatalf("%d agent credentials, want 2", n)
	}
}

func TestRotateRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.NewAgent(t, "painter", nil)
	cred := b.credentialOf(t, hubuapi.CredentialKindAgent, "painter")
	for _, overlap := range []int{-1, 86_401} {
		if r := rotate(t, b.Operator, cred.Id, 0); r.StatusCode() != http.StatusCreated {
			t.Fatalf("setup rotate: %d", r.StatusCode())
		}
		cred = b.credentialOf(t, hubuapi.CredentialKindAgent, "painter")
		body := hubuapi.RotateRequest{OverlapSeconds: &overlap}
		r, err := b.Operator.RotateCredentialWithResponse(ctx, cred.Id, body)
		if err != nil || r.StatusCode() != http.StatusBadRequest || problemCode(t, r.Body) != "invalid_arguments" {
			t.Fatalf("overlap %d: %v %d %s", overlap, err, r.StatusCode(), r.Body)
		}
	}
	r, err := b.Operator.RotateCredentialWithBodyWithResponse(ctx, cred.Id, "application/json", strings.NewReader(`{"overlap":60}`))
	if err != nil || r.StatusCode() != http.StatusBadRequest {
		t.Fatalf("an unknown field: %v %d %s", err, r.StatusCode(), r.Body)
	}
	if r := rotate(t, b.Operator, uuid.New(), 0); r.StatusCode() != http.StatusNotFound {
		t.Fatalf("rotate an unknown credential: %d %s", r.StatusCode(), r.Body)
	}
	// A revoked credential can be replaced (an agent whose token leaked gets a new one), but
	// not kept valid.
	revoke(t, b.Operator, cred.Id)
	if r := rotate(t, b.Operator, cred.Id, 60); r.StatusCode() != http.StatusBadRequest {
		t.Fatalf("rotate a revoked credential with an overlap: %d %s", r.StatusCode(), r.Body)
	}
	again := rotate(t, b.Operator, cred.Id, 0)
	if again.JSON201 == nil || again.JSON201.Replaced.State != hubuapi.CredentialStateRevoked || again.JSON201.Replaced.ExpiresAt != nil {
		t.Fatalf("rotate a revoked credential: %d %s", again.StatusCode(), again.Body)
	}
	if caps, _ := b.Client(t, again.JSON201.Token).GetCapabilitiesWithResponse(ctx); caps.JSON200 == nil {
		t.Fatalf("the revoked credential's replacement: %d %s", caps.StatusCode(), caps.Body)
	}
	// Another operator's credential is rotated by its holder only: a token in bob's name in
	// alice's hands would approve as bob.
	if _, err := b.Store.CreateCredential(ctx, hubu.RoleOperator, "bob", b.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	bob := b.credentialOf(t, hubuapi.CredentialKindOperator, "bob")
	if r := rotate(t, b.Operator, bob.Id, 0); r.StatusCode() != http.StatusForbidden || problemCode(t, r.Body) != "forbidden" {
		t.Fatalf("alice rotating bob's credential: %d %s", r.StatusCode(), r.Body)
	}
	if r := rotate(t, b.Operator, b.credentialOf(t, hubuapi.CredentialKindOperator, "alice").Id, 0); r.StatusCode() != http.StatusCreated {
		t.Fatalf("alice rotating her own credential: %d %s", r.StatusCode(), r.Body)
	}
}

// Gongbu's credential at Hubu is rotated with an overlap so that Gongbu's processes can be
// restarted one at a time: both tokens work until the overlap ends, and revoking the old one
// ends it at once.
func TestRotateServiceCredential(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	old := b.credentialOf(t, hubuapi.CredentialKindService, "gongbu")
	r := rotate(t, b.Operator, old.Id, 3600)
	if r.JSON201 == nil || !strings.HasPrefix(r.JSON201.Token, "hubu_service_") || r.JSON201.Credential.Kind != hubuapi.CredentialKindService {
		t.Fatalf("rotate: %d %s", r.StatusCode(), r.Body)
	}
	renewed := b.Client(t, r.JSON201.Token)
	for name, c := range map[string]*hubuapi.ClientWithResponses{"old": b.service, "new": renewed} {
		if l, _ := c.ListDecisionsWithResponse(ctx); l.JSON200 == nil {
			t.Fatalf("the %s token during the overlap: %d %s", name, l.StatusCode(), l.Body)
		}
	}
	b.Clock.Advance(time.Minute)
	if rv := revoke(t, b.Operator, old.Id); rv.JSON200 == nil || rv.JSON200.State != hubuapi.CredentialStateRevoked {
		t.Fatalf("revoke the old token in its overlap: %d %s", rv.StatusCode(), rv.Body)
	}
	l, _ := b.service.ListDecisionsWithResponse(ctx)
	refusal(t, "the old token after its revocation", l.StatusCode(), l.Body, "credential_revoked")
	if l, _ := renewed.ListDecisionsWithResponse(ctx); l.JSON200 == nil {
		t.Fatalf("the new token: %d %s", l.StatusCode(), l.Body)
	}
}

// Nobody may revoke the last operator credential that has no end: Hubu would be left with
// no one to manage it. Rotating it is the way to replace it.
func TestLastOperatorCredential(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	alice := b.credentialOf(t, hubuapi.CredentialKindOperator, "alice")
	r := revoke(t, b.Operator, alice.Id)
	if r.StatusCode() != http.StatusConflict || problemCode(t, r.Body) != "conflict" || !strings.Contains(problemDetail(t, r.Body), "last operator credential") {
		t.Fatalf("revoke the last operator credential: %d %s", r.StatusCode(), r.Body)
	}
	// Alice rotates her own credential with no overlap: her old token is refused at once.
	rot := rotate(t, b.Operator, alice.Id, 0)
	if rot.JSON201 == nil || rot.JSON201.Replaced.State != hubuapi.CredentialStateExpired {
		t.Fatalf("rotate the last operator credential: %d %s", rot.StatusCode(), rot.Body)
	}
	l, _ := b.Operator.ListCredentialsWithResponse(ctx)
	refusal(t, "alice's old token", l.StatusCode(), l.Body, "credential_expired")
	b.Operator = b.Client(t, rot.JSON201.Token)
	alice = b.credentialOf(t, hubuapi.CredentialKindOperator, "alice")
	// An expired operator credential is no lasting one: revoking it is allowed.
	if r := revoke(t, b.Operator, rot.JSON201.Replaced.Id); r.JSON200 == nil {
		t.Fatalf("revoke alice's expired credential: %d %s", r.StatusCode(), r.Body)
	}
	if r := revoke(t, b.Operator, alice.Id); r.StatusCode() != http.StatusConflict {
		t.Fatalf("revoke alice's new credential, the last: %d %s", r.StatusCode(), r.Body)
	}
	// With another operator, an operator may revoke herself; her next request is refused.
	bobToken, err := b.Store.CreateCredential(ctx, hubu.RoleOperator, "bob", b.Clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if r := revoke(t, b.Operator, alice.Id); r.JSON200 == nil {
		t.Fatalf("alice revokes herself beside bob: %d %s", r.StatusCode(), r.Body)
	}
	l, _ = b.Operator.ListCredentialsWithResponse(ctx)
	refusal(t, "alice after revoking herself", l.StatusCode(), l.Body, "credential_revoked")
	b.Operator = b.Client(t, bobToken)
	bob := b.credentialOf(t, hubuapi.CredentialKindOperator, "bob")
	if r := revoke(t, b.Operator, bob.Id); r.StatusCode() != http.StatusConflict {
		t.Fatalf("bob revokes himself, the last: %d %s", r.StatusCode(), r.Body)
	}
}

// Two operators who revoke each other at the same moment cannot both succeed: one operator
// credential always remains.
func TestOperatorsRevokingEachOtherAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	idOf := func(token string) uuid.UUID { return b.CredentialID(t, token) }
	survivor := b.OperatorToken
	for round := range 5 {
		var tokens [2]string
		for i := range tokens {
			var err error
			if tokens[i], err = b.Store.CreateCredential(ctx, hubu.RoleOperator, "op", b.Clock.Now()); err != nil {
				t.Fatal(err)
			}
		}
		// The last round's survivor leaves: the two new operators are the only lasting ones.
		if r := revoke(t, b.Client(t, survivor), idOf(survivor)); r.JSON200 == nil {
			t.Fatalf("round %d: the survivor leaves: %d %s", round, r.StatusCode(), r.Body)
		}
		ids := [2]uuid.UUID{idOf(tokens[0]), idOf(tokens[1])}
		var (
			wg     sync.WaitGroup
			status [2]int
		)
		for i := range 2 {
			c := b.Client(t, tokens[i])
			wg.Go(func() {
				if r, err := c.RevokeCredentialWithResponse(ctx, ids[1-i]); err == nil {
					status[i] = r.StatusCode()
				}
			})
		}
		wg.Wait()
		ok := 0
		for _, s := range status {
			switch s {
			case http.StatusOK:
				ok++
			case http.StatusConflict, http.StatusUnauthorized: // refused as the last, or revoked already
			default:
				t.Fatalf("round %d: answered %v", round, status)
			}
		}
		left := lastingOperators(t, b)
		if ok != 1 || len(left) != 1 {
			t.Fatalf("round %d: %d revocations succeeded (%v), %d lasting operators left; want 1 and 1", round, ok, status, len(left))
		}
		survivor = tokens[0]
		if left[0] == ids[1] {
			survivor = tokens[1]
		}
	}
}

func lastingOperators(t testing.TB, b *bundle) []uuid.UUID {
	t.Helper()
	rows, err := b.Pool.Query(context.Background(), `SELECT id FROM credentials WHERE kind = 'operator' AND revoked_at IS NULL AND expires_at IS NULL`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestCredentialsAreForOperatorsOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.NewAgent(t, "painter", nil)
	own := b.credentialOf(t, hubuapi.CredentialKindAgent, "painter")
	for name, c := range map[string]*hubuapi.ClientWithResponses{"agent": a.Client, "service": b.service} {
		if r, _ := c.ListCredentialsWithResponse(ctx); r.StatusCode() != http.StatusForbidden {
			t.Errorf("%s lists credentials: %d", name, r.StatusCode())
		}
		if r := revoke(t, c, own.Id); r.StatusCode() != http.StatusForbidden {
			t.Errorf("%s revokes: %d", name, r.StatusCode())
		}
		if r := rotate(t, c, own.Id, 0); r.StatusCode() != http.StatusForbidden {
			t.Errorf("%s rotates: %d", name, r.StatusCode())
		}
	}
	if got := b.credentialOf(t, hubuapi.CredentialKindAgent, "painter"); got.Id != own.Id {
		t.Fatal("a refused request changed the agent's credential")
	}
}

func problemDetail(t testing.TB, body []byte) string {
	t.Helper()
	var p hubuapi.Problem
	if err := json.Unmarshal(body, &p); err != nil || p.Detail == nil {
		t.Fatalf("no problem detail: %s", body)
	}
	return *p.Detail
}
