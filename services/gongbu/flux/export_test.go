package flux

import (
	"net/http"
	"time"
)

// NewTransport is the transport New gives an adapter.
var NewTransport = newTransport

// NewWithTransport is New with the transport given, so tests can trust a test certificate or
// route names to a local server; the transport must come from NewTransport.
func NewWithTransport(baseURL, apiKey string, honours bool, timeout time.Duration, transport *http.Transport) (*Adapter, error) {
	return newAdapter(Config{BaseURL: baseURL, APIKey: apiKey, HonoursIdempotency: honours, Timeout: timeout}, transport)
}

// NewAdapterWithTransport is NewAdapter with the transport given, as NewWithTransport.
func NewAdapterWithTransport(cfg Config, transport *http.Transport) (*Adapter, error) {
	return newAdapter(cfg, transport)
}
