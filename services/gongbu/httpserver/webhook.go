package httpserver

import (
	"io"
	"net/http"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/gongbu"
)

// Webhook is a provider adapter the provider can tell, with a signed notice, that a job is done.
type Webhook interface {
	// WebhookJob returns the job a notice names, not yet trusted.
	WebhookJob(body []byte) (string, error)
	// VerifyWebhook checks that a notice carries the secret of the decision whose job it names.
	VerifyWebhook(header http.Header, body []byte, decisionID uuid.UUID) error
}

// maxWebhookBody bounds a provider's notice; the real ones are a few dozen bytes.
const maxWebhookBody = 4 << 10

// ProviderWebhook takes a provider's signed notice that a job is done and polls the job at
// once: by waking the worker here that watches it, or else by claiming it (Nudge). The notice
// is only a wake-up (the result comes from polling), so its answer says nothing about the job:
// a notice about a job already finished is taken as well.
func (s *Server) ProviderWebhook(w http.ResponseWriter, r *http.Request, provider string) {
	hook, ok := s.Webhooks[provider]
	if !ok {
		s.writeError(w, r, gongbu.Errorf(gongbu.CodeNotFound, "this Gongbu takes no webhooks from %q", provider))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
	if err != nil {
		s.writeError(w, r, gongbu.Errorf(gongbu.CodePayloadTooLarge, "the notice is larger than %d bytes", maxWebhookBody))
		return
	}
	job, err := hook.WebhookJob(body)
	if err != nil {
		s.writeError(w, r, gongbu.Errorf(gongbu.CodeInvalidArguments, "%s", err.Error()))
		return
	}
	verified := func(decisionID uuid.UUID) bool {
		err := hook.VerifyWebhook(r.Header, body, decisionID)
		if err != nil {
			s.logger().WarnContext(r.Context(), "webhook refused", "provider", provider, "decision_id", decisionID, "err", err)
			s.writeError(w, r, gongbu.Errorf(gongbu.CodeUnauthorized, "%s", err.Error()))
		}
		return err == nil
	}
	// A job a worker here is watching: wake the watcher, which holds the job's lease, rather
	// than claim the job from it in the database.
	if decisionID, wake, ok := s.Executions.Watching(provider, job); ok {
		if verified(decisionID) {
			wake()
			w.WriteHeader(http.StatusNoContent)
		}
		return
	}
	exec, err := s.Executions.Store.GetByJob(r.Context(), provider, job)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !verified(exec.DecisionID) {
		return
	}
	if exec.State == gongbu.StateSubmitted {
		if _, err := s.Executions.Nudge(r.Context(), exec); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}
