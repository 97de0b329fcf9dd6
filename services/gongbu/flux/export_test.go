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
	return newAdapter(baseURL, apiKey, honours, timeout, transport)
}
