package lifecycle

import "github.com/prometheus/client_golang/prometheus"

// HandOffCounter counts Hubu's tries to hand a decision to the executor, by whether the
// executor accepted it: failures that keep growing are a Gongbu unreachable or refusing.
type HandOffCounter struct{ attempts *prometheus.CounterVec }

// NewHandOffCounter registers hubu_handoff_attempts_total{result} on reg.
func NewHandOffCounter(reg prometheus.Registerer) *HandOffCounter {
	c := &HandOffCounter{attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hubu_handoff_attempts_total",
		Help: "Tries to hand a decision to the executor, by result (accepted, failed).",
	}, []string{"result"})}
	// Both series exist from the start, so a rate over them is defined before the first failure.
	c.attempts.WithLabelValues("accepted")
	c.attempts.WithLabelValues("failed")
	reg.MustRegister(c.attempts)
	return c
}

// count records one try; a nil counter counts nothing.
func (c *HandOffCounter) count(err error) {
	if c == nil {
		return
	}
	result := "accepted"
	if err != nil {
		result = "failed"
	}
	c.attempts.WithLabelValues(result).Inc()
}
