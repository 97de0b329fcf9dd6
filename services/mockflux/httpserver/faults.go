package httpserver

import (
	"encoding/json"
	"net/http"
	"time"

	"hubu.dev/hubu/proto/bflapi"
)

func (s *Server) GetFaults(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.faults())
}

func (s *Server) ArmFault(w http.ResponseWriter, r *http.Request) {
	var req bflapi.FaultRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeDetail(w, http.StatusUnprocessableEntity, "the body is not a valid FaultRequest: "+err.Error())
		return
	}
	count, delayMS := deref(req.Count), deref(req.DelayMs)
	if err := s.Faults.Arm(req.Kind, count, time.Duration(delayMS)*time.Millisecond); err != nil {
		writeDetail(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	s.Logger.InfoContext(r.Context(), "fault armed", "kind", req.Kind, "count", count, "delay_ms", delayMS)
	writeJSON(w, http.StatusOK, s.faults())
}

func (s *Server) ClearFaults(w http.ResponseWriter, r *http.Request) {
	s.Faults.Clear()
	s.Logger.InfoContext(r.Context(), "faults cleared")
	writeJSON(w, http.StatusOK, s.faults())
}

func (s *Server) faults() bflapi.Faults {
	out := bflapi.Faults{Active: []bflapi.Fault{}, Idempotency: s.Provider.HonoursIdempotency()}
	for _, a := range s.Faults.Active() {
		f := bflapi.Fault{Kind: a.Kind, Count: a.Remaining}
		if a.Kind == bflapi.FaultKindSlow {
			f.DelayMs = new(int(a.Delay.Milliseconds()))
		}
		if a.Kind == bflapi.FaultKindIdempotencyOff {
			out.Idempotency = false
		}
		out.Active = append(out.Active, f)
	}
	return out
}
