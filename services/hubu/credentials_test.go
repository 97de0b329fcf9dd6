package hubu_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/hubu"
)

var (
	t0     = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	before = t0.Add(-time.Hour)
	after  = t0.Add(time.Hour)
	by     = hubu.CredentialRef{ID: uuid.MustParse("00000000-0000-4000-8000-000000000001"), Name: "alice"}
)

func TestCredentialStateAndAuthentication(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		cred      hubu.Credential
		state     hubu.CredentialState
		refusedAs hubu.Code // "" when it authenticates
	}{
		{"active", hubu.Credential{}, hubu.CredentialActive, ""},
		{"in its overlap", hubu.Credential{ExpiresAt: &after}, hubu.CredentialExpiring, ""},
		{"at the end of its overlap", hubu.Credential{ExpiresAt: &t0}, hubu.CredentialExpired, hubu.CodeCredentialExpired},
		{"after its overlap", hubu.Credential{ExpiresAt: &before}, hubu.CredentialExpired, hubu.CodeCredentialExpired},
		{"revoked", hubu.Credential{RevokedAt: &before}, hubu.CredentialRevoked, hubu.CodeCredentialRevoked},
		{"revoked in its overlap", hubu.Credential{RevokedAt: &before, ExpiresAt: &after}, hubu.CredentialRevoked, hubu.CodeCredentialRevoked},
	} {
		if got := c.cred.StateAt(t0); got != c.state {
			t.Errorf("%s: state %s, want %s", c.name, got, c.state)
		}
		err := c.cred.Authenticates(t0)
		switch {
		case c.refusedAs == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.refusedAs != "" && hubu.ErrorCode(err) != c.refusedAs:
			t.Errorf("%s: %v, want %s", c.name, err, c.refusedAs)
		}
	}
}

func TestCredentialRevoke(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name         string
		cred         hubu.Credential
		otherLasting int
		changed      bool
		refusedAs    hubu.Code
	}{
		{"agent", hubu.Credential{Role: hubu.RoleAgent}, 0, true, ""},
		{"service", hubu.Credential{Role: hubu.RoleService}, 0, true, ""},
		{"operator beside another", hubu.Credential{Role: hubu.RoleOperator}, 1, true, ""},
		{"the last lasting operator", hubu.Credential{Role: hubu.RoleOperator}, 0, false, hubu.CodeConflict},
		// An operator credential in its overlap is no lasting one: its replacement is.
		{"an expiring operator", hubu.Credential{Role: hubu.RoleOperator, ExpiresAt: &after}, 0, true, ""},
		{"already revoked", hubu.Credential{Role: hubu.RoleOperator, RevokedAt: &before}, 0, false, ""},
	} {
		out, changed, err := c.cred.Revoke(t0, by, c.otherLasting)
		switch {
		case c.refusedAs == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
			continue
		case c.refusedAs != "" && hubu.ErrorCode(err) != c.refusedAs:
			t.Errorf("%s: %v, want %s", c.name, err, c.refusedAs)
			continue
		}
		if changed != c.changed {
			t.Errorf("%s: changed %v, want %v", c.name, changed, c.changed)
		}
		if changed && (out.RevokedAt == nil || !out.RevokedAt.Equal(t0) || out.RevokedBy == nil || *out.RevokedBy != by) {
			t.Errorf("%s: revoked as %+v", c.name, out)
		}
		if !changed && c.cred.RevokedAt != nil && !out.RevokedAt.Equal(before) {
			t.Errorf("%s: the first revocation was not kept: %v", c.name, out.RevokedAt)
		}
	}
}

func TestCredentialRotate(t *testing.T) {
	t.Parallel()
	own, next := uuid.New(), uuid.New()
	for _, c := range []struct {
		name      string
		cred      hubu.Credential
		overlap   time.Duration
		by        uuid.UUID  // the rotating operator's credential
		expires   *time.Time // of the rotated credential
		refusedAs hubu.Code
	}{
		{"no overlap", hubu.Credential{}, 0, next, &t0, ""},
		{"an overlap", hubu.Credential{}, time.Hour, next, &after, ""},
		{"the longest overlap", hubu.Credential{}, hubu.MaxRotationOverlap, next, ptr(t0.Add(24 * time.Hour)), ""},
		{"too long an overlap", hubu.Credential{}, hubu.MaxRotationOverlap + time.Second, next, nil, hubu.CodeInvalidArguments},
		{"a negative overlap", hubu.Credential{}, -time.Second, next, nil, hubu.CodeInvalidArguments},
		{"replaced already", hubu.Credential{ReplacedBy: &next, ExpiresAt: &after}, 0, next, nil, hubu.CodeConflict},
		{"revoked, no overlap", hubu.Credential{RevokedAt: &before}, 0, next, nil, ""},
		{"revoked, with an overlap", hubu.Credential{RevokedAt: &before}, time.Minute, next, nil, hubu.CodeInvalidArguments},
		{"revoked and replaced", hubu.Credential{RevokedAt: &before, ReplacedBy: &next}, 0, next, nil, hubu.CodeConflict},
		// An operator credential is rotated only by its holder: a replacement in another
		// operator's name would let the rotating operator approve as them.
		{"an operator's own", hubu.Credential{ID: own, Role: hubu.RoleOperator}, time.Minute, own, ptr(t0.Add(time.Minute)), ""},
		{"another operator's", hubu.Credential{ID: own, Role: hubu.RoleOperator}, time.Minute, next, nil, hubu.CodeForbidden},
		{"an agent's", hubu.Credential{ID: own, Role: hubu.RoleAgent}, time.Minute, next, ptr(t0.Add(time.Minute)), ""},
		{"a service's", hubu.Credential{ID: own, Role: hubu.RoleService}, time.Minute, next, ptr(t0.Add(time.Minute)), ""},
	} {
		out, err := c.cred.Rotate(t0, c.overlap, c.by)
		if c.refusedAs != "" {
			if hubu.ErrorCode(err) != c.refusedAs {
				t.Errorf("%s: %v, want %s", c.name, err, c.refusedAs)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		switch {
		case c.expires == nil && out.ExpiresAt != nil, c.expires != nil && (out.ExpiresAt == nil || !out.ExpiresAt.Equal(*c.expires)):
			t.Errorf("%s: expires %v, want %v", c.name, out.ExpiresAt, c.expires)
		}
		if out.RevokedAt != c.cred.RevokedAt {
			t.Errorf("%s: a rotation changed the revocation", c.name)
		}
	}
}

func TestCredentialReplacement(t *testing.T) {
	t.Parallel()
	agent := uuid.New()
	old := hubu.Credential{ID: uuid.New(), Role: hubu.RoleAgent, Name: "painter", AgentID: &agent, CreatedAt: before}
	id := uuid.New()
	r := old.Replacement(id, t0, by)
	if r.ID != id || r.Role != old.Role || r.Name != old.Name || r.AgentID != old.AgentID || !r.CreatedAt.Equal(t0) ||
		r.CreatedBy == nil || *r.CreatedBy != by || r.Replaces == nil || *r.Replaces != old.ID || r.StateAt(t0) != hubu.CredentialActive {
		t.Fatalf("replacement %+v of %+v", r, old)
	}
}

func ptr[T any](v T) *T { return &v }
