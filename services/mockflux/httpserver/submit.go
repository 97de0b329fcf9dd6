package httpserver

import (
	"cmp"
	"io"
	"math"
	"net/http"
	"net/url"
	"time"

	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/services/mockflux"
)

func (s *Server) Submit(w http.ResponseWriter, r *http.Request, model string, params bflapi.SubmitParams) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		writeDetail(w, http.StatusUnprocessableEntity, "the body is too large or could not be read")
		return
	}
	effects := s.Faults.Take()
	if effects.Slow > 0 {
		select {
		case <-time.After(effects.Slow):
		case <-r.Context().Done():
			// The client left or the server is stopping: nothing was done, and nobody to tell.
			panic(http.ErrAbortHandler)
		}
	}
	if effects.FailBeforeCharge {
		writeDetail(w, http.StatusInternalServerError, "Internal Server Error (mockflux fault fail_before_charge: nothing was charged)")
		return
	}
	job, replayed, err := s.Provider.Submit(mockflux.SubmitRequest{
		Model: model, Body: body, IdempotencyKey: deref(params.IdempotencyKey), IgnoreKey: effects.IdempotencyOff, Outcome: effects.Outcome,
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var charged int64
	if !replayed {
		charged = job.CostMicros
		if job.Webhook.URL != "" {
			// Also when a fault then hides the answer: the job exists and renders.
			s.notify(job)
		}
	}
	// The idempotency key and the webhook are not logged: they are the caller's, and the job
	// id identifies the call.
	s.Logger.InfoContext(r.Context(), "submit", "job_id", job.ID, "model", job.Model, "replayed", replayed,
		"charged_micros", charged, "webhook", job.Webhook.URL != "")
	if effects.ChargeThenDrop {
		s.drop(w)
		return
	}
	if effects.ChargeThen500 {
		writeDetail(w, http.StatusInternalServerError, "Internal Server Error (mockflux fault charge_then_500: the task was charged)")
		return
	}
	writeJSON(w, http.StatusOK, bflapi.SubmitResponse{
		Id:         job.ID,
		PollingUrl: cmp.Or(s.PollingURL, otherName(r)) + "/v1/get_result?id=" + url.QueryEscape(job.ID),
		Cost:       new(credits(job.CostMicros)),
		InputMp:    new(megapixels(job.InputPixels...)),
		OutputMp:   new(megapixels(int64(job.Width) * int64(job.Height))),
	})
}

// credits is an amount in BFL's credits (1 credit = $0.01 = 10,000 micros), as its answers
// state a cost.
func credits(micros int64) float64 { return float64(micros) / 10_000 }

// megapixels are pixels in BFL's megapixels (2^20 pixels), to two decimals, as its answers
// state input_mp and output_mp.
func megapixels(pixels ...int64) float64 {
	var sum int64
	for _, px := range pixels {
		sum += px
	}
	return math.Round(float64(sum)/(1<<20)*100) / 100
}

// drop closes the connection without a response, as a provider that crashed after charging.
func (s *Server) drop(w http.ResponseWriter) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = conn.Close()
		return
	}
	panic(http.ErrAbortHandler) // HTTP/2 and other writers: net/http resets the stream
}
