package flux

import "net/http"

// NewTransport is the transport New gives an adapter.
var NewTransport = newTransport

// NewAdapterWithTransport is NewAdapter with the transport given, so tests can trust a test
// certificate or route names to a local server; the transport must come from NewTransport.
func NewAdapterWithTransport(cfg Config, transport *http.Transport) (*Adapter, error) {
	return newAdapter(cfg, transport)
}
