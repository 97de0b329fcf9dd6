package httpserver

import (
	"net/http"
	"time"

	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu"
)

func (s *Server) ListCredentials(w http.ResponseWriter, r *http.Request) {
	cs, err := s.Store.ListCredentials(r.Context())
	now := s.Now()
	s.respond(w, r, http.StatusOK, hubuapi.CredentialList{Credentials: each(cs, func(c hubu.Credential) hubuapi.Credential {
		return credentialOf(c, now)
	})}, err)
}

func (s *Server) RevokeCredential(w http.ResponseWriter, r *http.Request, id hubuapi.CredentialID) {
	who := principal(r)
	now := s.Now()
	c, err := s.Store.RevokeCredential(r.Context(), who, id, now)
	if err == nil {
		s.logger().InfoContext(r.Context(), "credential revoked", "credential_id", c.ID, "kind", c.Role, "name", c.Name,
			"operator", who.Name, "operator_credential_id", who.CredentialID)
	}
	s.respond(w, r, http.StatusOK, credentialOf(c, now), err)
}

func (s *Server) RotateCredential(w http.ResponseWriter, r *http.Request, id hubuapi.CredentialID) {
	who := principal(r)
	var body hubuapi.RotateRequest
	err := decode(w, r, &body, true)
	overlap := 0
	if body.OverlapSeconds != nil {
		overlap = *body.OverlapSeconds
	}
	// Checked here as well as in the domain: a huge number of seconds would overflow a Duration.
	if err == nil && (overlap < 0 || overlap > int(hubu.MaxRotationOverlap/time.Second)) {
		err = invalid("overlap_seconds must be between 0 and %d", int(hubu.MaxRotationOverlap/time.Second))
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	now := s.Now()
	rot, err := s.Store.RotateCredential(r.Context(), who, id, time.Duration(overlap)*time.Second, now)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.logger().InfoContext(r.Context(), "credential rotated", "credential_id", rot.Replaced.ID, "replacement_id", rot.Replacement.ID,
		"kind", rot.Replacement.Role, "name", rot.Replacement.Name, "overlap_seconds", overlap,
		"operator", who.Name, "operator_credential_id", who.CredentialID)
	writeJSON(w, http.StatusCreated, hubuapi.CredentialRotated{
		Credential: credentialOf(rot.Replacement, now), Token: rot.Token, Replaced: credentialOf(rot.Replaced, now),
	})
}

func credentialOf(c hubu.Credential, now time.Time) hubuapi.Credential {
	return hubuapi.Credential{
		Id: c.ID, Kind: hubuapi.CredentialKind(c.Role), Name: c.Name, AgentId: c.AgentID,
		State: hubuapi.CredentialState(c.StateAt(now)), CreatedAt: c.CreatedAt, CreatedBy: refOf(c.CreatedBy),
		Replaces: c.Replaces, ReplacedBy: c.ReplacedBy, ExpiresAt: c.ExpiresAt, RevokedAt: c.RevokedAt, RevokedBy: refOf(c.RevokedBy),
		ClientId: c.ClientID, ClientName: c.ClientName, LastUsedAt: c.LastUsedAt,
	}
}

func refOf(r *hubu.CredentialRef) *hubuapi.CredentialRef {
	if r == nil {
		return nil
	}
	return &hubuapi.CredentialRef{Id: r.ID, Name: r.Name}
}
