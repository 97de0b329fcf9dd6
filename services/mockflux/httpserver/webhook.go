package httpserver

import (
	"hubu.dev/hubu/services/mockflux"
	"hubu.dev/hubu/services/mockflux/webhook"
)

func (s *Server) notify(job mockflux.Job) {
	due := job.RenderedAt
	if job.Outcome == mockflux.OutcomeRequestModerated {
		due = job.CreatedAt // flagged before processing: it never renders
	}
	s.notices.Send(webhook.Notice{JobID: job.ID, Status: job.Outcome, URL: job.Webhook.URL, Secret: []byte(job.Webhook.Secret), Due: due})
}

// webhookDone counts and journals how a webhook ended. A journal that refuses the record
// leaves the webhook due after a restart: sent twice rather than never, which receivers
// must bear anyway.
func (s *Server) webhookDone(jobID string, o webhook.Outcome) {
	s.webhooks.WithLabelValues(string(o)).Inc()
	if err := s.Provider.RecordWebhook(jobID, string(o)); err != nil {
		s.Logger.Error("cannot record the webhook's outcome; a restart will send it again", "job_id", jobID, "outcome", o, "err", err)
	}
}
