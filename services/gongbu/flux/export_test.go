package flux

import "net/http"

// NewTransport is the transport of the reads of an adapter New makes; its submits' transport
// is made from it.
var NewTransport = newTransport

// NewAdapterWithTransport is NewAdapter with the transport given, so tests can trust a test
// certificate or route names to a local server; the transport must come from NewTransport.
func NewAdapterWithTransport(cfg Config, transport *http.Transport) (*Adapter, error) {
	return newAdapter(cfg, transport)
}
