package httpserver

import (
	"net/http"

	"hubu.dev/hubu/proto/bflapi"
)

func (s *Server) ListCharges(w http.ResponseWriter, r *http.Request) {
	charges, total := s.Provider.Charges()
	count, _ := s.Provider.ChargeTotals()
	out := bflapi.Charges{Charges: make([]bflapi.Charge, len(charges)), Count: count, TotalMicros: total}
	for i, c := range charges {
		out.Charges[i] = bflapi.Charge{
			Id: c.ID, JobId: c.JobID, Model: c.Model, AmountMicros: c.AmountMicros,
			IdempotencyKey: c.IdempotencyKey, CreatedAt: c.CreatedAt,
		}
		if c.Refunded {
			out.Charges[i].Refunded = new(true)
		}
		if !c.ReadyAt.IsZero() {
			out.Charges[i].ReadyAt = new(c.ReadyAt)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// GetCredits answers the account's balance in credits, as the real API's /v1/credits does;
// without a limit (no --credits), a balance that never runs out.
func (s *Server) GetCredits(w http.ResponseWriter, r *http.Request) {
	micros, limited := s.Provider.Credits()
	if !limited {
		micros = 1 << 50
	}
	writeJSON(w, http.StatusOK, bflapi.CreditsResponse{Credits: credits(micros)})
}
