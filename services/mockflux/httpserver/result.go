package httpserver

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"

	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/services/mockflux"
	"hubu.dev/hubu/services/mockflux/render"
)

func (s *Server) GetResult(w http.ResponseWriter, r *http.Request, params bflapi.GetResultParams) {
	poll, ok := s.Provider.Poll(params.Id)
	if !ok {
		writeJSON(w, http.StatusOK, bflapi.ResultResponse{Id: params.Id, Status: bflapi.ResultStatusTaskNotFound})
		return
	}
	if !poll.Ready {
		writeJSON(w, http.StatusOK, bflapi.ResultResponse{Id: poll.Job.ID, Status: bflapi.ResultStatusPending, Progress: new(poll.Progress)})
		return
	}
	job := poll.Job
	if job.Outcome != "" {
		// An end without a result, as the real API answers it: no result, and for a
		// moderation the reasons in details.
		res := bflapi.ResultResponse{Id: job.ID, Status: bflapi.ResultStatus(job.Outcome)}
		if job.Outcome != mockflux.OutcomeError {
			res.Details = &map[string]any{"Moderation Reasons": []string{"mockflux fault"}}
		}
		writeJSON(w, http.StatusOK, res)
		return
	}
	file := job.ID + "." + job.Format
	// From the first Ready answer, not from when the job rendered: a job polled late (after
	// a restart, or by a caller that lost its webhook) still gets a URL that works.
	exp := poll.FirstReady.Add(s.SampleTTL).Unix()
	sample := cmp.Or(s.DeliveryURL, otherName(r)) + "/samples/" + file + "?exp=" + strconv.FormatInt(exp, 10) + "&sig=" + s.sign(file, exp)
	start, end := unixSeconds(job.CreatedAt), unixSeconds(poll.ReadyAt)
	writeJSON(w, http.StatusOK, bflapi.ResultResponse{
		Id:     job.ID,
		Status: bflapi.ResultStatusReady,
		Result: &bflapi.Result{Sample: sample, Prompt: new(job.Prompt), Seed: new(job.Seed), StartTime: &start, EndTime: &end, Duration: new(end - start)},
	})
}

func (s *Server) GetSample(w http.ResponseWriter, r *http.Request, file string, params bflapi.GetSampleParams) {
	if !hmac.Equal([]byte(params.Sig), []byte(s.sign(file, params.Exp))) {
		writeDetail(w, http.StatusForbidden, "invalid sample URL signature")
		return
	}
	if s.Now().Unix() > params.Exp {
		writeDetail(w, http.StatusForbidden, "the sample URL has expired")
		return
	}
	id, ext, _ := strings.Cut(file, ".")
	job, ok := s.Provider.Job(id)
	if !ok || ext != job.Format {
		writeDetail(w, http.StatusNotFound, "no such sample")
		return
	}
	encode := render.Encode
	if s.FullSize {
		encode = render.EncodeFull
	}
	img, contentType, err := encode(job.Format, job.Prompt, job.Seed, job.Width, job.Height)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(img)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(img)
}

// sign is the hex HMAC-SHA256 of a sample file name and its expiry.
func (s *Server) sign(file string, exp int64) string {
	m := hmac.New(sha256.New, s.SigningKey)
	m.Write([]byte(file + "\n" + strconv.FormatInt(exp, 10)))
	return hex.EncodeToString(m.Sum(nil))
}

func unixSeconds(t time.Time) float64 {
	return float64(t.UnixMicro()) / 1e6
}
