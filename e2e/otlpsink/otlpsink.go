// Package otlpsink is an OTLP/HTTP trace receiver for the tests and the load generator: it
// decodes every export the processes send it (protobuf, gzip or not) and keeps it, so that
// the spans of a spend can be read back.
package otlpsink

import (
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// maxExport bounds one export's body.
const maxExport = 16 << 20

// Sink is the receiver, an http.Handler for POST /v1/traces. The zero value is ready.
type Sink struct {
	mu      sync.Mutex
	exports []*coltracepb.ExportTraceServiceRequest
	last    time.Time // when the last export arrived
}

func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = http.MaxBytesReader(w, r.Body, maxExport)
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(body)
		if err != nil {
			http.Error(w, "the export is not gzip", http.StatusBadRequest)
			return
		}
		defer zr.Close()
		body = zr
	}
	b, err := io.ReadAll(body)
	export := &coltracepb.ExportTraceServiceRequest{}
	if err == nil {
		err = proto.Unmarshal(b, export)
	}
	if r.URL.Path != "/v1/traces" || err != nil {
		http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.exports = append(s.exports, export)
	s.last = time.Now()
	s.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Exports are the exports received so far, in the order they arrived.
func (s *Sink) Exports() []*coltracepb.ExportTraceServiceRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.exports)
}

// LastExport is when the last export arrived (zero before the first).
func (s *Sink) LastExport() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// Span is one received span with the name of the service that made it.
type Span struct {
	*tracepb.Span
	Service string
}

// Trace is the spans received so far of the trace with the hex id traceID.
func (s *Sink) Trace(traceID string) []Span {
	var out []Span
	for _, e := range s.Exports() {
		for _, rs := range e.ResourceSpans {
			service := ""
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					if hex.EncodeToString(sp.TraceId) == traceID {
						out = append(out, Span{Span: sp, Service: service})
					}
				}
			}
		}
	}
	return out
}

// RandomHex is n random bytes in hex: a trace id (16) or a span id (8) for a traceparent.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
