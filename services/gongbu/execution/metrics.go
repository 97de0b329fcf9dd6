package execution

import (
	"github.com/prometheus/client_golang/prometheus"

	"hubu.dev/hubu/services/gongbu"
)

// What made a worker poll a job, as the metrics count it.
const (
	TriggerWatch   = "watch"   // the submitting worker's own early looks
	TriggerWebhook = "webhook" // the provider said the job is done
	TriggerPass    = "pass"    // the background pass, the backstop of both
)

// Metrics are the execution service's counters.
type Metrics struct {
	polls *prometheus.CounterVec
}

// NewMetrics registers the counters on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{polls: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gongbu_provider_polls_total",
		Help: "Polls of provider jobs by what triggered them (watch, webhook, pass) and what they found (pending, ready, failed, lost, error).",
	}, []string{"trigger", "result"})}
	reg.MustRegister(m.polls)
	return m
}

var pollResults = map[gongbu.PollStatus]string{
	gongbu.JobPending: "pending", gongbu.JobReady: "ready", gongbu.JobFailed: "failed", gongbu.JobLost: "lost",
}

func (s *Service) countPoll(trigger string, res gongbu.PollResult, err error) {
	if s.Metrics == nil {
		return
	}
	result := pollResults[res.Status]
	if err != nil {
		result = "error"
	}
	s.Metrics.polls.WithLabelValues(trigger, result).Inc()
}
